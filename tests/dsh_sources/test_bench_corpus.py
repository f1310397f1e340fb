"""The benchmark corpus generator (`bench.corpus`) writes homes the sources read as the agents' own."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from bench.corpus import PLANTED_PHRASE, RECORD_CAP, Corpus, append_claude, double_largest, generate
from bench.corpus.opencode import generate_opencode
from dsh_compact import COMPACT_CHECKPOINT_SOURCE
from dsh_host import Host
from dsh_sources.formats.gemini_cli import GeminiCliFormat
from dsh_sources.index import SourceIndex
from dsh_sources.source import TranscriptSource
from tests.dsh_sources.conftest import AgentDirs, SourceHost


def _digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() for path in root.rglob("*.jsonl")
    }


def _listed(host: Host) -> set[str]:
    return {row.id for name in ("claude-code", "codex") for row in host.sources.get(name).list_sessions()}


def test_the_sources_read_every_session_and_find_the_planted_phrase_in_exactly_the_planted_ones(
    tmp_path: Path, agent_dirs: AgentDirs, source_host: SourceHost
) -> None:
    corpus = generate(tmp_path, gb=0.01, seed=7)
    assert Path(corpus.claude_dir) == agent_dirs.claude and Path(corpus.codex_dir) == agent_dirs.codex
    assert corpus.files == len(list(tmp_path.rglob("*.jsonl"))) == 50
    assert 0.9e7 < corpus.bytes < 1.2e7
    host = source_host("session-reference")

    listed = _listed(host)
    assert len(listed) == corpus.files
    assert {corpus.big_claude.session_id, corpus.big_codex.session_id, *corpus.planted} <= listed
    query = host.services.session_query
    found = asyncio.run(query.search_candidates(PLANTED_PHRASE, target_id=None, target_cwd=None, limit=50))
    assert len(corpus.planted) == 3
    assert {row.id for row in found} == set(corpus.planted)

    big = Path(corpus.big_claude.path)
    lines = big.read_bytes().splitlines()
    assert sum(map(len, lines)) + len(lines) == big.stat().st_size == corpus.big_claude.bytes
    assert all(len(line) < RECORD_CAP and type(json.loads(line)) is dict for line in lines)
    claude = host.sources.get("claude-code")
    assert claude.check() == [] and host.sources.get("codex").check() == []
    surface = claude.read_surface(corpus.big_claude.session_id)
    assert any(event["type"] == "assistant/message" for event in surface.events)

    appended = append_claude(big, 20_000, "the appended marker prompt", seed=3)
    assert big.stat().st_size == corpus.big_claude.bytes + appended
    texts = [json.dumps(event) for event in claude.read_surface(corpus.big_claude.session_id).events]
    assert sum("the appended marker prompt" in text for text in texts) == 1


def test_the_same_seed_writes_the_same_bytes_and_a_doubled_variant_links_all_but_the_big_file(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", gb=0.005, seed=11)
    again = generate(tmp_path / "b", gb=0.005, seed=11)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _replace_root(first, "a") == _replace_root(again, "b")

    doubled = double_largest(first, tmp_path / "c")
    big = Path(doubled.big_claude.path)
    assert big.relative_to(tmp_path / "c") == Path(first.big_claude.path).relative_to(tmp_path / "a")
    assert 1.9 < big.stat().st_size / first.big_claude.bytes < 2.1
    for path in (tmp_path / "c").rglob("*.jsonl"):
        original = tmp_path / "a" / path.relative_to(tmp_path / "c")
        assert os.path.samefile(path, original) == (path != big)


def _replace_root(corpus: Corpus, name: str) -> str:
    text = json.dumps({**corpus.as_json(), "seconds": 0, "mb_per_s": 0})
    return text.replace(f"/{name}/", "/ROOT/").replace(f'/{name}"', '/ROOT"')


def test_gemini_sessions_are_written_only_when_asked_and_read_as_gemini_cli_s_own(tmp_path: Path) -> None:
    plain = generate(tmp_path / "plain", gb=0.005, seed=5)
    both = generate(tmp_path / "both", gb=0.005, seed=5, gemini_gb=0.004)
    assert _digest(tmp_path / "plain") == {
        name: digest for name, digest in _digest(tmp_path / "both").items() if not name.startswith("gemini/")
    }
    assert "gemini_dir" not in plain.as_json() and plain.gemini_files == 0 and plain.big_gemini is None
    assert both.gemini_dir == str(tmp_path / "both" / "gemini") and both.big_gemini is not None
    written = list((tmp_path / "both" / "gemini").rglob("session-*.jsonl"))
    assert both.gemini_files == len(written) == 20 and both.files == plain.files + 20
    assert both.gemini_bytes == sum(path.stat().st_size for path in written) and 3e6 < both.gemini_bytes < 5e6

    fmt = GeminiCliFormat(Path(both.gemini_dir))
    source = TranscriptSource("gemini-cli", fmt, SourceIndex(tmp_path / "index.sqlite3", "gemini-cli", 1))
    listed = {row.id: row for row in source.list_sessions()}
    assert len(listed) == both.gemini_files and source.check() == []
    big = listed[both.big_gemini.session_id]
    assert big.cwd == both.big_gemini.cwd
    surface = source.read_surface(both.big_gemini.session_id)
    markers = [event["data"].get("source") for event in surface.events if event["type"] == "user/message"]
    assert COMPACT_CHECKPOINT_SOURCE in markers
    source.close()


def test_the_opencode_flag_adds_a_database_the_opencode_source_reads_whole(tmp_path: Path, capsys) -> None:
    from bench.corpus.__main__ import main
    from tests.dsh_sources.opencode_builders import opencode_source

    assert main([str(tmp_path / "plain"), "--gb", "0.002"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "opencode" not in plain and not (tmp_path / "plain" / "opencode").exists()
    assert main([str(tmp_path / "four"), "--gb", "0.002", "--opencode-gb", "0.002"]) == 0
    written = json.loads(capsys.readouterr().out)["opencode"]
    assert sorted(os.listdir(written["dir"])) == ["opencode.db"]
    source = opencode_source(Path(written["dir"]), tmp_path / "index.sqlite3")
    rows = source.list_sessions()
    assert len(rows) == written["sessions"] and all(row.title and row.title.startswith("Work on the") for row in rows)
    assert source.read_surface(rows[0].id) is not None and source.check() == [] and source.problems() == []
    source.close()


def test_a_size_of_no_gigabytes_for_opencode_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    from bench.corpus.__main__ import main

    with pytest.raises(SystemExit) as exit:
        main([str(tmp_path / "out"), "--opencode-gb", "0"])
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("--opencode-gb must be positive, not 0.0")
    assert not (tmp_path / "out").exists()


def _rows(database: str, big: str) -> list[tuple[object, ...]]:
    """Every message and part row of the sessions other than `big` (and their children)."""
    with sqlite3.connect(f"file:{database}?mode=ro&immutable=1", uri=True) as conn:
        return conn.execute(
            "SELECT 'message', id, data FROM message WHERE session_id != ?1 "
            "UNION ALL SELECT 'part', id, data FROM part WHERE session_id != ?1 ORDER BY 1, 2",
            (big.partition(":")[2],),
        ).fetchall()


def test_four_agents_home_has_a_big_opencode_session_and_doubling_it_rewrites_only_the_database(
    tmp_path: Path,
) -> None:
    from tests.dsh_sources.opencode_builders import opencode_source

    corpus = generate(tmp_path / "a", gb=0.004, seed=3, gemini_gb=0.002, opencode_gb=0.004)
    opencode = corpus.opencode
    assert opencode is not None and corpus.database_is_largest and corpus.largest_bytes == opencode.bytes
    assert set(corpus.dirs()) == {"claude-code", "codex", "gemini-cli", "opencode"}
    assert corpus.sessions == corpus.files + opencode.sessions == 20 + 10 + 20
    assert corpus.as_json()["opencode"]["sessions"] == opencode.sessions  # type: ignore[index]
    source = opencode_source(Path(opencode.dir), tmp_path / "index.sqlite3")
    listed = {row.id for row in source.list_sessions()}
    assert len(listed) == opencode.sessions and opencode.big.session_id in listed
    surface = source.read_surface(opencode.big.session_id)
    markers = [event["data"].get("source") for event in surface.events if event["type"] == "user/message"]
    assert COMPACT_CHECKPOINT_SOURCE in markers
    source.close()

    doubled = double_largest(corpus, tmp_path / "b")
    assert doubled.opencode is not None and doubled.opencode.dir == str(tmp_path / "b" / "opencode")
    assert 1.8 < doubled.opencode.bytes / opencode.bytes < 2.2
    assert doubled.opencode.big.session_id == opencode.big.session_id
    assert doubled.opencode.big.bytes > 4 * opencode.big.bytes
    assert _rows(doubled.opencode.database, opencode.big.session_id) == _rows(
        opencode.database, opencode.big.session_id
    )
    assert doubled.big_claude == replace(corpus.big_claude, path=doubled.big_claude.path)
    for path in (tmp_path / "b").rglob("*.jsonl"):
        assert os.path.samefile(path, tmp_path / "a" / path.relative_to(tmp_path / "b"))


def test_a_negative_size_of_opencode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^--opencode-gb must not be negative, not -1\.0$"):
        generate(tmp_path, gb=0.002, opencode_gb=-1.0)
    with pytest.raises(ValueError, match=r"^the big OpenCode session must be positive, not 0 bytes$"):
        generate_opencode(tmp_path / "opencode", 0.002, big_gb=0.0)
