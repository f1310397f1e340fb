"""`dsh mcp` on sources that are still indexing: a search answers within 5 s from what is indexed,
saying how far each build has come; the build goes on across calls; a read is never partial; the
end, mid-build, still exits 0 within 2 s.

The source is a throwaway indexed one (`tests/mcp/slow_index.py`) mounted in a real `dsh mcp`
process through an entry point, whose build waits until the test releases it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.mcp.test_mcp_stdio import McpProcess

NOTES = {"a.md": "Walrus parser plans\nParse the walrus logs.\n", "b.md": "Walrus migration notes\nMove it all.\n"}
REPOSITORY = Path(__file__).resolve().parents[2]


def _mount(tmp_path: Path, *, hang_on_close: bool = False) -> tuple[dict[str, str], Path]:
    """The environment of a `dsh mcp` mounting the slow-indexing notes source, and its release FIFO."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    release = tmp_path / "release"
    os.mkfifo(release)
    site = tmp_path / "site"
    info = site / "slow_index-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slow-index\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dsh]\nnotes = tests.mcp.slow_index\n")
    config = tmp_path / "dsh.toml"
    config.write_text(
        '[host]\nplugins = ["session-reference", "mcp", "notes"]\n'
        f"[sources.notes]\ndir = {str(notes)!r}\nrelease = {str(release)!r}\n"
        f"hang_on_close = {str(hang_on_close).lower()}\n",
        encoding="utf-8",
    )
    path = os.pathsep.join(filter(None, [str(site), str(REPOSITORY), os.environ.get("PYTHONPATH")]))
    return {"DSH_CONFIG": str(config), "DSH_HOME": str(tmp_path / "data"), "PYTHONPATH": path}, release


@pytest.fixture
def indexing(tmp_path: Path) -> tuple[dict[str, str], Path]:
    return _mount(tmp_path)


def _search(mcp: McpProcess, request_id: int, query: str) -> tuple[dict, float]:
    """The result of `search_sessions(query)` and the seconds it took to answer."""
    started = time.monotonic()
    mcp.request(request_id, "tools/call", {"name": "search_sessions", "arguments": {"query": query}})
    answer = mcp.answer(request_id)
    return answer["result"], time.monotonic() - started


def test_a_search_mid_build_answers_from_the_index_so_far_and_says_so(tmp_path, indexing):
    env, release = indexing
    mcp = McpProcess(tmp_path, **env)
    mcp.initialize()

    partial, seconds = _search(mcp, 1, "walrus")
    assert seconds < 5.0
    assert [s["id"] for s in partial["structuredContent"]["sessions"]] == ["notes:a.md"]
    sizes = [len(text.encode()) for text in NOTES.values()]
    assert partial["structuredContent"]["indexing"] == {
        "notes": {"filesDone": 1, "filesTotal": 2, "bytesDone": sizes[0], "bytesTotal": sum(sizes)}
    }
    found, line = partial["content"]
    assert found["text"].startswith('{"sessions": [')
    assert line["text"] == (
        f"Still indexing sessions (Slow notes 1 of 2 files ({sizes[0]} B of {sum(sizes)} B)): these results come "
        "from what is indexed so far; search again later for the rest."
    )

    # A snapshot is whole whatever the index holds: the source reads the note itself.
    mcp.request(2, "tools/call", {"name": "read_sessions", "arguments": {"references": ["notes:b.md"]}})
    read = mcp.answer(2)["result"]
    assert not read.get("isError") and "Move it all." in read["content"][0]["text"]

    with release.open("wb") as fifo:  # the build goes on and finishes
        fifo.write(b"go")
    complete, _ = _search(mcp, 3, "walrus")
    assert "indexing" not in complete["structuredContent"]
    assert len(complete["content"]) == 1
    assert sorted(s["id"] for s in complete["structuredContent"]["sessions"]) == ["notes:a.md", "notes:b.md"]
    code, rest, err = mcp.finish()
    assert (code, rest, err) == (0, [], "")


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_the_end_mid_build_cancels_it_and_exits_0_within_2_s(tmp_path, indexing, how):
    env, _ = indexing
    mcp = McpProcess(tmp_path, **env)
    mcp.initialize()
    partial, _ = _search(mcp, 1, "walrus")
    assert "indexing" in partial["structuredContent"]  # the build is waiting for a release that never comes
    started = time.monotonic()
    if how == "sigterm":
        mcp.process.terminate()
    code, rest, err = mcp.finish()  # the build's thread ends only when the host closes the source
    assert time.monotonic() - started < 2.0
    assert (code, rest, err) == (0, [], "")


def test_a_build_that_does_not_cancel_does_not_hold_up_the_end(tmp_path):
    env, _ = _mount(tmp_path, hang_on_close=True)
    mcp = McpProcess(tmp_path, **env)
    mcp.initialize()
    partial, _ = _search(mcp, 1, "walrus")
    assert "indexing" in partial["structuredContent"]
    started = time.monotonic()
    code, rest, err = mcp.finish()
    assert time.monotonic() - started < 2.0
    assert (code, rest) == (0, [])
    assert err.splitlines() == ["dsh: warning: mcp: leaving a store read or an index build unfinished"]


def test_a_search_in_flight_at_eof_answers_at_once_from_the_index_so_far(tmp_path, indexing):
    env, _ = indexing
    mcp = McpProcess(tmp_path, **env)
    mcp.initialize()
    mcp.request(1, "tools/call", {"name": "search_sessions", "arguments": {"query": "walrus"}})
    code, frames, err = mcp.finish()  # EOF right behind it, as `printf ... | dsh mcp`: no time to wait
    assert (code, err) == (0, "")
    (answer,) = frames
    assert answer["id"] == 1
    assert [s["id"] for s in answer["result"]["structuredContent"]["sessions"]] == ["notes:a.md"]
    assert answer["result"]["structuredContent"]["indexing"]["notes"]["filesDone"] == 1
