"""`dsh demo` as a user runs it: a real process, a clean environment, then its data opened with `dsh sessions`.

The demo compacts a source session, mentions it from a target session and runs one turn. The
test checks what it prints and, independently, what it stored: the target's single baked
`user/message` and a snapshot that carries the source's current surface and nothing of what
compaction shadowed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.e2e.e2e_support import (
    COMPACT_SOURCE,
    DELIMITER,
    REFERENCE_SOURCE,
    WARNING,
    assert_one_baked_message,
    clean_env,
    json_lines,
    ok,
    run_dsh,
    snapshot_json,
    text_of,
)

PROMPT = "Using @storage decisions, what did we decide about storage, and why?"


def _surface_projection(surface: list[dict]) -> list[dict[str, str]]:
    """The conversation a reference projects from a surface (user, compact checkpoint, assistant)."""
    out = []
    for event in surface:
        data = event["data"]
        if event["type"] == "user/message" and data["source"] in ({"kind": "user"}, COMPACT_SOURCE):
            content = data.get("envelope", {}).get("displayContent", data["content"])
            role = "user"
        elif event["type"] == "assistant/message":
            content, role = data["content"], "assistant"
        else:
            continue
        text = "\n".join(b["text"] for b in content if b.get("type") == "text")
        if text:
            out.append({"role": role, "text": text})
    return out


def test_demo_runs_keyless_and_stores_one_baked_message(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data_dir = tmp_path / "data"
    env = clean_env(tmp_path)
    assert "DSH_HOME" not in env

    demo = ok(run_dsh(["demo", "--data-dir", str(data_dir)], env=env, cwd=work))
    out = demo.stdout

    # What it prints: the sections, the source's compaction, the card, the exact request.
    source_id = re.search(r"Source session (\S+): its log \((\d+) events\)", out).group(1)
    target_id = re.search(r"Target session (\S+): the user types", out).group(1)
    assert source_id != target_id
    for title in (
        "Source surface after compaction",
        "The target's turn, as the terminal UI renders it",
        "The exact model request the target sent (last message)",
    ):
        assert title in out
    assert re.search(r"^\s*\d+ compact/start\b", out, re.MULTILINE), out
    assert f"Referenced sessions · storage decisions ({source_id})" in out
    request = out.split("The exact model request the target sent (last message)", 1)[1]
    assert "block 0 (text):" in request and "block 1 (text):" in request and "block 2 (text):" in request
    assert WARNING in request
    assert "## My request:" in request
    assert PROMPT in request
    assert f"DSH_HOME={data_dir}" in out
    # Nothing went to the default data dir of this (fake) home.
    assert not any((tmp_path / "home").rglob("*.sqlite3"))

    # What it stored, read back by separate `dsh sessions` processes on the data dir.
    data_env = {**env, "DSH_HOME": str(data_dir)}
    listed = json_lines(ok(run_dsh(["sessions", "list", "--json"], env=data_env, cwd=work)).stdout)
    assert {record["id"] for record in listed} == {source_id, target_id}
    assert all(record["persisted"] for record in listed)
    target_log = json_lines(ok(run_dsh(["sessions", "show", target_id, "--json"], env=data_env, cwd=work)).stdout)
    source_log = json_lines(ok(run_dsh(["sessions", "show", source_id, "--json"], env=data_env, cwd=work)).stdout)
    surface = json_lines(
        ok(run_dsh(["sessions", "show", source_id, "--surface", "--json"], env=data_env, cwd=work)).stdout
    )

    data = assert_one_baked_message(target_log, PROMPT)
    assert data["source"] == {"kind": "user"}
    (prefix,) = data["envelope"]["prefixContexts"]
    assert prefix["source"] == REFERENCE_SOURCE
    (reference,) = prefix["meta"]["references"]
    assert reference["sessionId"] == source_id
    assert reference["label"] == "storage decisions"
    assert reference["compacted"] is True
    snapshot_text = data["content"][0]["text"]
    # The demo printed block 0 byte for byte.
    assert snapshot_text in out
    assert data["content"][1]["text"] == DELIMITER

    # The snapshot is the source's current surface, projected; nothing compaction shadowed.
    tag_safe = snapshot_json(snapshot_text)
    assert "<" not in tag_safe
    assert "\\u003ccompacted-summary>" in tag_safe
    (item,) = json.loads(tag_safe)
    assert item["sessionId"] == source_id
    assert item["label"] == "storage decisions"
    assert item["cwd"] == str(work.resolve())
    assert item["capturedThroughSeq"] == source_log[-1]["seq"]
    assert item["conversation"] == _surface_projection(surface)
    assert "<compacted-summary>" in item["conversation"][0]["text"]
    on_surface = {e["seq"] for e in surface}
    shadowed = [
        text_of(e["data"]["content"])
        for e in source_log
        if e["type"] in ("user/message", "assistant/message") and e["seq"] not in on_surface
    ]
    shadowed_users = [
        text_of(e["data"]["content"])
        for e in source_log
        if e["type"] == "user/message" and e["seq"] not in on_surface and e["data"]["source"] == {"kind": "user"}
    ]
    assert len(shadowed_users) >= 2, "the demo's compaction shadowed no user message"
    decoded = json.dumps(item, ensure_ascii=False)
    for text in shadowed:
        assert len(text) > 40
        assert text not in tag_safe
        assert text not in decoded
        assert json.dumps(text, ensure_ascii=False)[1:-1] not in tag_safe
    # Only the checkpoint speaks for the shadowed turns.
    assert sum(1 for entry in item["conversation"] if "compacted-summary" in entry["text"]) == 1

    # The target's turn ran on the keyless model and completed.
    assert target_log[-1]["type"] == "turn/end"
    assert target_log[-1]["data"]["reason"] == {"kind": "completed"}
    assert [e["type"] for e in target_log].count("turn/start") == 1
