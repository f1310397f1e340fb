"""`dsh run` writes model text to the terminal with its control characters inert."""

from __future__ import annotations

import json

PROBE = "hi \x1b]2;pwned\x07 \x9b31m red\x7f\n"


def test_streamed_text_and_json_lines_carry_no_raw_controls(dsh_cli, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": PROBE}, {"text": PROBE}]), encoding="utf-8")
    dsh_cli.home = tmp_path / "data"
    dsh_cli.env["DSH_SCRIPT"] = str(script)

    code, out, _ = dsh_cli("run", "say it")
    assert code == 0
    assert r"hi \x1b]2;pwned\x07 \x9b31m red\x7f" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b\x7f")

    code, out, _ = dsh_cli("run", "--json", "again")
    assert code == 0
    lines = out.splitlines()
    assert not any(ch in line for line in lines for ch in "\x1b\x07\x9b\x7f")
    message = next(json.loads(line) for line in lines if '"assistant/message"' in line)
    assert message["data"]["content"][0]["text"] == PROBE  # the same value, only written inertly
