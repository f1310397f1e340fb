"""What the corpus writers put in their records: ids, timestamps, prompt and reply text, tool output.

Everything is made here from a seeded `random.Random`, as bytes ready to drop into a JSON
template: texts are built from plain words (nothing to escape), and tool outputs are
JSON-escaped once, into a pool the writers pick from, so writing a record copies bytes
instead of encoding them.
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import BinaryIO

PLANTED_PHRASE = "quasar ledger reconciliation"
"""The phrase planted in exactly three small sessions' prompts (no other text holds "quasar")."""

SEARCH_TOPIC = "rollout parser"
"""One of `TOPICS`: about 1 session in 50 is about it, so a search for it finds a few hundred."""

TOPICS = (
    SEARCH_TOPIC,
    "database migration",
    "retry policy",
    "cache invalidation",
    "login form",
    "payment webhook",
    "search ranking",
    "config loader",
    "build script",
    "release notes",
    "queue consumer",
    "image resizer",
    "rate limiter",
    "audit log",
    "schema validator",
    "feature flag",
    "email template",
    "metrics exporter",
    "session cookie",
    "backup job",
    "dependency upgrade",
    "flaky test",
    "memory leak",
    "error page",
    "csv export",
    "websocket reconnect",
    "pagination cursor",
    "timezone bug",
    "permission check",
    "docker image",
    "api client",
    "markdown renderer",
    "cron schedule",
    "pdf report",
    "sso callback",
    "upload limit",
    "locale fallback",
    "graphql resolver",
    "thread pool",
    "json schema",
    "tls certificate",
    "dark mode",
    "onboarding flow",
    "invoice total",
    "sitemap generator",
    "health check",
    "log rotation",
    "ci pipeline",
    "vector index",
    "profile page",
)

CWDS = (
    "/home/dev/src/billing",
    "/home/dev/src/web-frontend",
    "/home/dev/src/api-gateway",
    "/home/dev/src/data-pipeline",
    "/home/dev/src/mobile_app",
    "/home/dev/src/infra",
    "/home/dev/work/notes",
    "/home/dev/src/search-service",
    "/srv/projects/ledger",
    "/home/dev/src/cli-tools",
    "/home/dev/src/docs.site",
    "/tmp/scratch",
)

_VERBS = ("fix", "refactor", "explain", "speed up", "add tests for", "review", "simplify", "document", "debug")
_PLACES = ("handler", "module", "service", "worker", "view", "helper", "adapter", "model", "script")
_WHY = (
    "it fails on empty input",
    "the numbers look off",
    "CI is red since yesterday",
    "customers reported it twice",
    "it is slow on large accounts",
    "the logs are noisy",
    "we need it before the release",
)
_SAYS = (
    "I read the code and found the cause",
    "The change is small and covered by a test",
    "Here is what I changed and why",
    "I ran the suite and everything passes",
    "There are two options with different costs",
    "The failing case comes from an off by one",
)
_THINK = (
    "Let me look at how the caller uses this before changing it",
    "The test names suggest the edge case is an empty list",
    "I should check the git history for why this was added",
    "Running the focused tests first is cheaper than the whole suite",
)
_CODE_WORDS = ("value", "total", "items", "config", "result", "record", "buffer", "offset", "account", "entry")

BASE_MS = 1_748_736_000_000  # 2025-06-01T00:00:00Z
DAY_MS = 86_400_000


def session_start(rng: random.Random) -> int:
    """When a session other than a big one starts: any moment of the 540 days from `BASE_MS`."""
    return BASE_MS + rng.randrange(540) * DAY_MS + rng.randrange(DAY_MS)


class Ids:
    """Random uuids and hex ids as bytes."""

    def __init__(self, rng: random.Random) -> None:
        self._bits = rng.getrandbits

    def uuid(self) -> bytes:
        text = f"{self._bits(128):032x}"
        return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-a{text[17:20]}-{text[20:]}".encode()

    def hex(self, digits: int) -> bytes:
        return b"%0*x" % (digits, self._bits(4 * digits))


class Clock:
    """Milliseconds since the epoch, advanced record by record, and their ISO form."""

    def __init__(self, ms: int) -> None:
        self.ms = ms
        self._day = -1
        self._prefix = b""

    def advance(self, ms: int) -> bytes:
        """Move on by `ms` and return the new time as `2026-01-01T00:00:00.000Z`."""
        self.ms += ms
        return self.iso()

    def iso(self) -> bytes:
        day, rest = divmod(self.ms, DAY_MS)
        if day != self._day:
            self._day = day
            self._prefix = datetime.fromtimestamp(day * 86_400, tz=timezone.utc).strftime("%Y-%m-%dT").encode()
        seconds, millis = divmod(rest, 1000)
        minutes, seconds = divmod(seconds, 60)
        return self._prefix + b"%02d:%02d:%02d.%03dZ" % (minutes // 60, minutes % 60, seconds, millis)

    def date_path(self) -> tuple[str, str]:
        """(`YYYY/MM/DD`, `YYYY-MM-DDTHH-MM-SS`) of now, as Codex names a rollout."""
        moment = datetime.fromtimestamp(self.ms / 1000, tz=timezone.utc)
        return moment.strftime("%Y/%m/%d"), moment.strftime("%Y-%m-%dT%H-%M-%S")


def _output_text(rng: random.Random, size: int) -> str:
    """Tool output of about `size` characters: a listing, a test run, source code or a diff."""
    kind = rng.randrange(4)
    lines: list[str] = []
    length = 0
    number = 0
    while length < size:
        number += 1
        word = _CODE_WORDS[(number * 7 + kind) % len(_CODE_WORDS)]
        if kind == 0:
            line = (
                f"-rw-r--r--  1 dev staff {number * 131 % 90_000:6d} Nov {number % 28 + 1:2d} "
                f"10:{number % 60:02d} {word}_{number}.py"
            )
        elif kind == 1:
            mark = "PASSED" if number % 3 else "✓ passed"
            line = f"tests/test_{word}.py::test_{word}_{number} {mark}{' ' * (number % 9)}[{number % 100:3d}%]"
        elif kind == 2:
            line = f'    {word}_{number} = compute("{word}", offset={number}) + {word}["total"]\t# keep — see «{word}»'
        else:
            line = f"@@ -{number},7 +{number},8 @@\n-    return {word}\n+    return {word} or {{}}"
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def _escaped(value: object) -> bytes:
    """`value` as JSON in UTF-8, as the agents write it (non-ASCII characters as they are)."""
    return json.dumps(value, ensure_ascii=False).encode()


@dataclass(frozen=True)
class Output:
    """One tool output, JSON-escaped (without its quotes), in the forms the records carry it."""

    text: bytes
    numbered: bytes  # as `cat -n` shows it (a file read)
    lines: int
    patch: bytes  # a JSON array of diff lines made from it (an edit's structured patch)


def _output(rng: random.Random, size: int) -> Output:
    text = _output_text(rng, size)
    lines = text.split("\n")
    numbered = "\n".join(f"{number:6d}\t{line}" for number, line in enumerate(lines, 1))
    changed = lines[: max(3, min(len(lines), rng.randrange(4, 300)))]
    patch = [("-+ "[n % 3]) + line for n, line in enumerate(changed)]
    return Output(_escaped(text)[1:-1], _escaped(numbered)[1:-1], len(lines), _escaped(patch))


class Blobs:
    """Tool outputs from about 80 bytes to 64 KB (log-uniform), and rare outputs of megabytes."""

    def __init__(self, rng: random.Random, count: int = 160) -> None:
        sizes = sorted(int(80 * 800 ** (n / (count - 1))) for n in range(count))
        self._rng = rng
        self.pool = [_output(rng, size) for size in sizes]
        self._sizes = [len(output.text) for output in self.pool]

    def pick(self, limit: int) -> Output:
        """A random output no longer than `limit` bytes (the smallest one if none is)."""
        top = max(1, bisect_right(self._sizes, limit))
        return self.pool[self._rng.randrange(top)]

    def heavy(self, size: int) -> bytes:
        """One output of about `size` bytes (a file read whole, a long log), JSON-escaped."""
        piece = self.pool[-1].text
        whole, rest = divmod(size, len(piece) + 2)
        # Cut at a character, never inside an escape or a UTF-8 sequence.
        tail = piece[:rest].decode("utf-8", "ignore").rstrip("\\").encode()
        return (piece + b"\\n") * whole + tail


class Texts:
    """Prompts, replies and thinking of one session, about one topic, as plain ASCII bytes."""

    def __init__(self, rng: random.Random, topic: str) -> None:
        self._rng = rng
        self.topic = topic

    def prompt(self, extra: str = "") -> bytes:
        rng = self._rng
        text = (
            f"please {rng.choice(_VERBS)} the {self.topic} {rng.choice(_PLACES)}, "
            f"{rng.choice(_WHY)} (ticket {rng.randrange(100, 9999)})"
        )
        return (f"{text}. {extra}" if extra else text).encode()

    def reply(self) -> bytes:
        rng = self._rng
        return (
            f"{rng.choice(_SAYS)} in the {self.topic} {rng.choice(_PLACES)}: "
            f"see line {rng.randrange(10, 900)} of {rng.choice(_CODE_WORDS)}.py."
        ).encode()

    def thinking(self) -> bytes:
        return f"{self._rng.choice(_THINK)} in the {self.topic} code.".encode()

    def command(self) -> bytes:
        rng = self._rng
        return f"grep -rn {rng.choice(_CODE_WORDS)} src/ | head -{rng.randrange(20, 400)}".encode()

    def file(self) -> bytes:
        """A source file's path under the project."""
        return f"{self._rng.choice(_CODE_WORDS)}/{self.topic.replace(' ', '_')}.py".encode()

    def summary(self) -> bytes:
        return f"We worked on the {self.topic} and changed the {self._rng.choice(_PLACES)}; tests pass.".encode()


@dataclass(frozen=True)
class SessionFile:
    """One session the generator wrote: its file (or database), session id (with the source's prefix), cwd and size."""

    path: str
    session_id: str
    cwd: str
    bytes: int


@dataclass
class Habits:
    """How often a session does the rarer things (per turn), and where it puts records of megabytes."""

    rewind: float = 0.03  # a Claude Code rewind, a Codex rollback
    compact_every: int = 0  # bytes between compactions; 0 for none
    heavy_every: int = 0  # bytes between outputs of megabytes; 0 for none
    heavy_size: int = 0


class SessionWriter(ABC):
    """What a writer of one session file keeps: its file, text, randomness, clock and habits, and the bytes written."""

    def __init__(
        self, out: BinaryIO, rng: random.Random, blobs: Blobs, texts: Texts, *, cwd: str, clock: Clock, habits: Habits
    ) -> None:
        self.out, self.rng, self.blobs, self.texts, self.clock, self.habits = out, rng, blobs, texts, clock, habits
        self.ids = Ids(rng)
        self.cwd = cwd.encode()
        self.written = 0
        self.turns = 0
        self._next_compact = habits.compact_every
        self._next_heavy = habits.heavy_every

    def _put(self, line: bytes) -> None:
        self.out.write(line)
        self.written += len(line)

    def _tool_output(self, limit: int) -> bytes:
        """A tool output: one of megabytes when one is due (`Habits.heavy_every`), else one of at most `limit` bytes."""
        habits = self.habits
        if habits.heavy_every and self.written >= self._next_heavy:
            self._next_heavy = self.written + habits.heavy_every
            return self.blobs.heavy(habits.heavy_size)
        return self.blobs.pick(max(0, limit)).text

    @abstractmethod
    def turn(self, target: int, extra: str = "") -> None:
        """One turn, its tool outputs picked to fit what is left of `target` bytes (its prompt carrying `extra`)."""

    def fill(self, target: int, extra: str = "") -> None:
        """Turns until `target` bytes are written (the first prompt carrying `extra`)."""
        while self.written < target:
            self.turn(target, extra if self.turns == 0 else "")
