"""Other agents' sessions in the pages: named by their agent, filtered by it, followed live."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

import dsh_host.web
from dsh_host.testing import HostFactory
from dsh_session_reference import encode_uri
from tests.dsh_sources.builders import ClaudeTranscript, CodexRollout
from tests.web.conftest import BASE, TOKEN, guarded
from tests.web.sessions import conversation, store_log

CWD = "/work/parsers"


def test_agents_are_named_filtered_and_followed(make_host: HostFactory, tmp_path: Path) -> None:
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    transcript = ClaudeTranscript(cwd=CWD)
    transcript.user("look at the parser")
    transcript.reply(("text", "Looked at it."))
    transcript.custom_title("Parser in Claude")
    transcript.write(claude)
    rollout = CodexRollout(cwd=CWD)
    rollout.meta()
    rollout.context()
    rollout.turn_context()
    rollout.user("parser again")
    rollout.assistant("Done.")
    rollout.thread_name("Parser in Codex")
    rollout.write(codex)
    tables = {"claude-code": {"dir": str(claude)}, "codex": {"dir": str(codex)}}
    host = make_host(
        ["claude-code", "codex", "session-reference"], objects={"web": dsh_host.web}, config={"sources": tables}
    )
    for name in ("claude-code", "codex"):
        host.sources.get(name).build_index()  # the listing then holds every session at once
    store_log(host, "own", conversation(("mine", "yes"), title="Parser at home"), created_at=1, cwd=CWD)
    with TestClient(guarded(host), base_url=BASE) as client:
        listing = client.get(f"/?token={TOKEN}").text
        assert '<td class="agent">Claude Code</td>' in listing and '<td class="agent">Codex</td>' in listing
        only = client.get("/?agent=claude-code").text
        assert "Parser in Claude" in only and "Parser in Codex" not in only and "Parser at home" not in only
        assert "Parser at home" in client.get("/?agent=dsh").text

        uri = encode_uri(f"claude-code:{transcript.session_id}")
        page = client.get(f"/s/{uri}").text
        assert "Looked at it." in page and "Full log" not in page and "dsh chat" not in page
        assert "Looked at it." in client.get(f"/s/{uri}/preview").text
        found = client.get("/search?q=parser").text
        assert found.count('class="session"') == 3

        position = client.get(f"/s/{uri}/after").json()["position"]
        transcript.user("one more thing")
        transcript.reply(("text", "Answered live."))
        transcript.write(claude)
        news = client.get(f"/s/{uri}/after", params={"position": position}).json()
        assert "one more thing" in news["html"] and "Answered live." in news["html"]
        assert news["position"] > position
