"""Start `dsh web` from a fresh environment, fetch its printed address, stop it with SIGTERM.

`.ci/run` runs this with the `dsh` of an environment that has only the distributions the
README's `dsh web` install names; it checks that the command prints its address, that the
address (with its secret) answers the session list, that the same page without the secret is
refused, and that SIGTERM ends it with exit 0. Exits 1 with a line saying why.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx


def main(dsh: str) -> int:
    server = subprocess.Popen([dsh, "web", "--no-open", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("dsh web: serving on http://127.0.0.1:"):
            print(f"ci: dsh web printed {line!r}", file=sys.stderr)
            return 1
        url = line.split()[-1]
        with httpx.Client(follow_redirects=True, timeout=30) as client:
            page = client.get(url)
        bare = httpx.get(url.split("?")[0], timeout=30)
        if page.status_code != 200 or "<h1>Sessions</h1>" not in page.text or bare.status_code != 403:
            print(
                f"ci: dsh web answered {page.status_code} with the secret, {bare.status_code} without", file=sys.stderr
            )
            return 1
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
    code = server.wait(timeout=30)
    if code != 0:
        print(f"ci: dsh web ended with exit {code} on SIGTERM", file=sys.stderr)
        return 1
    print("ci: dsh web from a fresh environment serves its list and ends with exit 0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
