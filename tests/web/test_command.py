"""`dsh web` as a process: it prints its URL, serves it, and ends with exit 0 on SIGTERM or Ctrl+C."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from dsh_host import Host
from dsh_host.web.cli import exposure_warning, is_loopback
from tests.web.server import ROOT, dsh_web, environment
from tests.web.sessions import conversation, store_log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_its_url_and_ends_with_exit_0(web_host: Host, tmp_path, sig) -> None:
    store_log(web_host, "s", conversation(("q", "a"), title="Served title"), created_at=1, cwd="/a")
    with dsh_web(web_host.data_dir, tmp_path) as served:
        assert served.url.startswith("http://127.0.0.1:") and "?token=" in served.url
        with httpx.Client(follow_redirects=True) as http:
            assert "Served title" in http.get(served.url).text
            assert http.get(served.origin + "/").status_code == 200  # the cookie carries the secret
        assert httpx.get(served.origin + "/").status_code == 403
        assert served.stop(sig) == 0


def test_a_taken_port_is_one_line_and_exit_2(web_host: Host, tmp_path) -> None:
    with dsh_web(web_host.data_dir, tmp_path) as served:
        port = served.origin.rsplit(":", 1)[1]
        taken = subprocess.run(
            [sys.executable, "-m", "tests.web.serve", "--no-open", "--port", port],
            cwd=ROOT,
            env=environment(web_host.data_dir, tmp_path),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert taken.returncode == 2
        assert taken.stderr.splitlines()[-1].startswith(f"dsh: error: dsh web: cannot listen on 127.0.0.1 port {port}")


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("10.1.2.3", False)],
)
def test_loopback_addresses_are_told_apart_and_only_another_is_warned_of(address, loopback) -> None:
    assert is_loopback(address) is loopback
    warning = exposure_warning(address)
    assert (warning is None) is loopback
    assert warning is None or (warning.startswith(f"dsh web: warning: listening on {address}, not loopback"))
