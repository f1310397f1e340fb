"""A real terminal for tests: tmux on a private socket, typed into and read back."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

DEADLINE = 30.0


class Terminal:
    """A tmux server of our own (private socket) running one command in one window.

    The command gets exactly `env` (no inherited variables: a stray COLUMNS would override the
    pane's width in rich). When it exits, the pane shows `[dsh exited N]` and stays open.
    """

    def __init__(
        self, command: list[str], *, cwd: Path, env: dict[str, str], width: int = 120, height: int = 40
    ) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is not installed: .ci/run installs it (apt-get install tmux)")
        self.socket = f"dsh-e2e-{uuid.uuid4().hex[:12]}"
        assignments = [f"{key}={value}" for key, value in env.items()]
        # The shell reports dsh's exit status and then keeps the pane (and its screen) open.
        script = '"$@"; echo "[dsh exited $?]"; exec cat'
        self._tmux(
            "new-session", "-d", "-s", "e2e", "-n", "dsh", "-x", str(width), "-y", str(height), "-c", str(cwd),
            "env", "-i", *assignments, "sh", "-c", script, "sh", *command,
        )  # fmt: skip

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False, timeout=30
        )
        assert done.returncode == 0, f"tmux {args[0]} failed: {done.stderr}"
        return done.stdout

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "e2e:dsh", "-l", text)

    def type_keys(self, text: str) -> None:
        """`text` one key per send, as a person types, rather than in one write."""
        for key in text:
            self.type(key)

    def press(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "e2e:dsh", *keys)

    def screen(self, window: str = "dsh") -> str:
        """The visible screen and its scrollback."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-1000", "-t", f"e2e:{window}")

    def title(self, window: str = "dsh") -> str:
        return self._tmux("display-message", "-p", "-t", f"e2e:{window}", "#{pane_title}").strip()

    def wait_for(self, text: str, *, count: int = 1) -> str:
        deadline = time.monotonic() + DEADLINE
        while True:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} (x{count}) never appeared; the screen:\n{screen}")
            time.sleep(0.05)

    def wait_until(self, check, what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} never happened; the screen:\n{self.screen()}")
            time.sleep(0.05)

    def open_window(self, name: str, shell: str) -> None:
        """A second window (not selected) running `shell`."""
        self._tmux("new-window", "-d", "-t", "e2e:", "-n", name, "sh", "-c", shell)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False, timeout=30)
