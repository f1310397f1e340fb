"""`dsh run` writes model text to the terminal with its control characters inert."""

from __future__ import annotations

import json

from dsh_host.cli.main import main

PROBE = "hi \x1b]2;pwned\x07 \x9b31m red\x7f\n"


def test_streamed_text_and_json_lines_carry_no_raw_controls(tmp_path, monkeypatch, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": PROBE}, {"text": PROBE}]), encoding="utf-8")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("DSH_LOAD_PLUGINS", "")
    monkeypatch.setenv("DSH_SCRIPT", str(script))
    monkeypatch.delenv("DSH_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)

    assert main(["run", "say it"]) == 0
    out = capsys.readouterr().out
    assert r"hi \x1b]2;pwned\x07 \x9b31m red\x7f" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b\x7f")

    assert main(["run", "--json", "again"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(ch in line for line in lines for ch in "\x1b\x07\x9b\x7f")
    message = next(json.loads(line) for line in lines if '"assistant/message"' in line)
    assert message["data"]["content"][0]["text"] == PROBE  # the same value, only written inertly
