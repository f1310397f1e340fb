"""A synthetic, format-faithful home of agent sessions for the benchmarks: Claude Code, Codex, and when asked Gemini CLI
and OpenCode.

`generate(out, gb)` writes about `gb` GB: 55 % Claude Code transcripts under
`out/claude/projects/<escaped cwd>/<uuid>.jsonl`, 45 % Codex rollouts under
`out/codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`. A quarter of the total is one
Claude Code transcript, and 17.5 % one Codex rollout (at 2 GB: 500 MB and 350 MB), each with a
few records of megabytes (every record stays under `RECORD_CAP`) and compactions along the way;
the rest is about 5,000 small sessions per GB (at most 10,000) of skewed sizes in a dozen cwds.
Most bytes are tool output, as in real homes. `PLANTED_PHRASE` is in the first prompt of exactly
three small sessions, named in the result. The same seed writes the same bytes.

With `gemini_gb` (`--gemini-gb G`) it also writes about G GB of Gemini CLI sessions (JSON lines,
as v0.44+ writes them) under `out/gemini/tmp/<project slug>/chats/session-*.jsonl`, with each
project's `.project_root` and `projects.json`: a quarter of them one big session with
compressions, the rest about 5,000 small sessions per GB. They come after everything else and
from their own random streams, so the Claude Code and Codex files are the same bytes with or
without them; the default (0) writes none and reports as before. With `opencode_gb`
(`--opencode-gb G`) it writes an OpenCode data folder too, `out/opencode/opencode.db` of about G
GB (`opencode.generate_opencode`: a quarter of it one big session), likewise apart.

Every record is made here (`material`, `claude`, `codex`, `gemini`, `opencode`): no real
transcript is read or kept. Run it as `python -m bench.corpus OUT_DIR [--gb 2.0] [--seed N]
[--big-claude-gb G] [--big-codex-gb G] [--gemini-gb G] [--opencode-gb G]` (it prints what it
wrote); `--gb 9 --big-claude-gb 1.06 --big-codex-gb 0.7` is a home like the one issue 37's table
was measured on.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bench.corpus.claude import RECORD_CAP, ClaudeWriter, last_chain_record
from bench.corpus.codex import CodexWriter
from bench.corpus.gemini import GeminiWriter
from bench.corpus.material import (
    BASE_MS,
    CWDS,
    DAY_MS,
    PLANTED_PHRASE,
    SEARCH_TOPIC,
    TOPICS,
    Blobs,
    Clock,
    Habits,
    Ids,
    SessionFile,
    Texts,
    session_start,
)
from bench.corpus.opencode import OpenCodeCorpus, generate_opencode

__all__ = [
    "PLANTED_PHRASE",
    "RECORD_CAP",
    "SEARCH_TOPIC",
    "Corpus",
    "OpenCodeCorpus",
    "SessionFile",
    "append_claude",
    "double_largest",
    "generate",
    "write_claude_session",
]

CLAUDE_SHARE = 0.55
BIG_CLAUDE_SHARE = 0.25
BIG_CODEX_SHARE = 0.175
BIG_GEMINI_SHARE = 0.25
SESSIONS_PER_GB = 5_000
MAX_SESSIONS = 10_000
_BUFFER = 1 << 20


@dataclass(frozen=True)
class Corpus:
    """What `generate` wrote: the two agent homes to mount, counts, the big files and the planted sessions."""

    root: str
    claude_dir: str
    codex_dir: str
    claude_files: int
    claude_bytes: int
    codex_files: int
    codex_bytes: int
    big_claude: SessionFile
    big_codex: SessionFile
    planted: tuple[str, ...]
    seconds: float
    gemini_dir: str | None = None
    """The Gemini CLI folder (`[sources.gemini-cli] dir`), when Gemini CLI sessions were asked for."""
    gemini_files: int = 0
    gemini_bytes: int = 0
    big_gemini: SessionFile | None = None
    opencode: OpenCodeCorpus | None = None
    """The OpenCode data folder (`[sources.opencode] dir`) and its database, when asked for."""

    @property
    def files(self) -> int:
        """The session files (an OpenCode database, holding many sessions, is not counted)."""
        return self.claude_files + self.codex_files + self.gemini_files

    @property
    def sessions(self) -> int:
        """The sessions the sources list: one per file, and the OpenCode database's root sessions."""
        return self.files + (0 if self.opencode is None else self.opencode.sessions)

    @property
    def bytes(self) -> int:
        return self.claude_bytes + self.codex_bytes + self.gemini_bytes + self.opencode_bytes

    @property
    def opencode_bytes(self) -> int:
        return 0 if self.opencode is None else self.opencode.bytes

    def dirs(self) -> dict[str, str]:
        """Each source's folder (`[sources.<name>] dir`), for the agents written."""
        dirs = {"claude-code": self.claude_dir, "codex": self.codex_dir}
        if self.gemini_dir is not None:
            dirs["gemini-cli"] = self.gemini_dir
        if self.opencode is not None:
            dirs["opencode"] = self.opencode.dir
        return dirs

    @property
    def database_is_largest(self) -> bool:
        """Whether the OpenCode database is larger than the big transcript (the largest of the other files)."""
        return self.opencode is not None and self.opencode.bytes > self.big_claude.bytes

    @property
    def largest_bytes(self) -> int:
        return self.opencode_bytes if self.database_is_largest else self.big_claude.bytes

    def as_json(self) -> dict[str, object]:
        out = asdict(self)
        if self.gemini_dir is None:
            for key in ("gemini_dir", "gemini_files", "gemini_bytes", "big_gemini"):
                del out[key]
        if self.opencode is None:
            del out["opencode"]
        out.update(
            files=self.files,
            bytes=self.bytes,
            planted_phrase=PLANTED_PHRASE,
            mb_per_s=round(self.bytes / 1e6 / self.seconds, 1) if self.seconds else None,
        )
        return out


def claude_folder(base: Path, cwd: str) -> Path:
    """`<base>/projects/<cwd with every character but ASCII letters and digits as '-'>`."""
    return base / "projects" / "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in cwd)


class _Home:
    """Writes sessions into a Claude Code home (`claude`) and a Codex one (`codex`), keeping the counts."""

    def __init__(self, out: Path, rng: random.Random, blobs: Blobs, *, claude: Path | None = None) -> None:
        self.claude = claude or out / "claude"
        self.codex = out / "codex"
        self.rng = rng
        self.ids = Ids(rng)
        self.blobs = blobs
        self.gemini = out / "gemini"
        self.counts = {"claude": [0, 0], "codex": [0, 0], "gemini": [0, 0]}
        self._projects: dict[str, str] = {}
        self._folders: set[Path] = set()

    def _open(self, path: Path) -> Path:
        if path.parent not in self._folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._folders.add(path.parent)
        return path

    def _written(self, home: str, path: Path, session_id: str, cwd: str, size: int) -> SessionFile:
        """The session written into `home` (counted there)."""
        count = self.counts[home]
        count[0] += 1
        count[1] += size
        return SessionFile(str(path), session_id, cwd, size)

    def claude_session(
        self, target: int, habits: Habits, *, cwd: str, start: int, extra: str = "", session_id: bytes | None = None
    ) -> SessionFile:
        rng = self.rng
        sid = session_id or self.ids.uuid()
        path = claude_folder(self.claude, cwd) / f"{sid.decode()}.jsonl"
        texts = Texts(rng, rng.choice(TOPICS))
        with open(self._open(path), "wb", buffering=_BUFFER) as out:
            writer = ClaudeWriter(
                out, rng, self.blobs, texts, session_id=sid, cwd=cwd, clock=Clock(start), habits=habits
            )
            writer.fill(target, extra)
            roll = rng.random()
            writer.metadata(f"work on the {texts.topic}".encode() if roll < 0.1 else None, summary=roll > 0.85)
        return self._written("claude", path, f"claude-code:{sid.decode()}", cwd, writer.written)

    def codex_session(self, target: int, habits: Habits, *, cwd: str, start: int, extra: str = "") -> SessionFile:
        rng = self.rng
        sid = self.ids.uuid()
        clock = Clock(start)
        day, stamp = clock.date_path()
        path = self.codex / "sessions" / day / f"rollout-{stamp}-{sid.decode()}.jsonl"
        with open(self._open(path), "wb", buffering=_BUFFER) as out:
            writer = CodexWriter(
                out, rng, self.blobs, Texts(rng, rng.choice(TOPICS)), cwd=cwd, clock=clock, habits=habits
            )
            writer.start(sid)
            writer.fill(target, extra)
        return self._written("codex", path, f"codex:{sid.decode()}", cwd, writer.written)

    def gemini_session(self, target: int, habits: Habits, *, cwd: str, start: int) -> SessionFile:
        rng = self.rng
        sid = self.ids.uuid()
        clock = Clock(start)
        stamp = clock.iso()[:16].replace(b":", b"-").decode()
        path = self.gemini / "tmp" / self._project(cwd) / "chats" / f"session-{stamp}-{sid[:8].decode()}.jsonl"
        with open(self._open(path), "wb", buffering=_BUFFER) as out:
            writer = GeminiWriter(
                out, rng, self.blobs, Texts(rng, rng.choice(TOPICS)), cwd=cwd, clock=clock, habits=habits
            )
            writer.start(sid, hashlib.sha256(cwd.encode()).hexdigest().encode())
            writer.fill(target)
        return self._written("gemini", path, f"gemini-cli:{sid.decode()}", cwd, writer.written)

    def _project(self, cwd: str) -> str:
        """The project folder's slug (its root's name), with its `.project_root` and `projects.json` entry."""
        slug = self._projects.get(cwd)
        if slug is None:
            slug = self._projects[cwd] = os.path.basename(cwd).lower()
            folder = self.gemini / "tmp" / slug
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".project_root").write_text(cwd, encoding="utf-8")
            registry = {"projects": dict(self._projects)}
            (self.gemini / "projects.json").write_text(json.dumps(registry, indent=2), encoding="utf-8")
        return slug


def _targets(rng: random.Random, count: int, total: float) -> list[int]:
    """`count` file sizes summing to about `total`, skewed as real homes are (many small, a few large)."""
    weights = [rng.lognormvariate(0.0, 1.1) for _ in range(count)]
    scale = total / sum(weights)
    return [max(2_000, int(weight * scale)) for weight in weights]


def _big_habits(size: int, heavy_cap: int) -> Habits:
    """A big session's habits: its outputs of megabytes a 40th of its size, at most `heavy_cap` bytes."""
    heavy_size = min(heavy_cap, max(1, size // 40))
    return Habits(
        rewind=0.02, compact_every=max(64_000, size // 12), heavy_every=max(1, size // 6), heavy_size=heavy_size
    )


def _big_claude(home: _Home, size: int, cwd: str, session_id: bytes | None = None) -> SessionFile:
    habits = _big_habits(size, heavy_cap=3_000_000)
    return home.claude_session(size, habits, cwd=cwd, start=BASE_MS, session_id=session_id)


def generate(
    out: Path,
    gb: float = 2.0,
    seed: int = 0,
    *,
    big_claude_gb: float | None = None,
    big_codex_gb: float | None = None,
    gemini_gb: float = 0.0,
    opencode_gb: float = 0.0,
) -> Corpus:
    """Write the corpus into `out` (which should be empty) and say what was written.

    The two big files are 25 % and 17.5 % of `gb` unless `big_claude_gb` / `big_codex_gb` say
    otherwise (the issue's 9 GB home had a 1.06 GB transcript and a 700 MB rollout). With
    `gemini_gb`, about that much of Gemini CLI sessions besides, and with `opencode_gb` an OpenCode
    database of about that size (see the module's docstring).
    """
    if gemini_gb < 0:
        raise ValueError(f"--gemini-gb must not be negative, not {gemini_gb}")
    if opencode_gb < 0:
        raise ValueError(f"--opencode-gb must not be negative, not {opencode_gb}")
    big_claude_size = int((gb * BIG_CLAUDE_SHARE if big_claude_gb is None else big_claude_gb) * 1e9)
    codex_big_size = int((gb * BIG_CODEX_SHARE if big_codex_gb is None else big_codex_gb) * 1e9)
    if gb <= 0:
        raise ValueError(f"--gb must be positive, not {gb}")
    if not (0 < big_claude_size < gb * 1e9 * CLAUDE_SHARE and 0 < codex_big_size < gb * 1e9 * (1 - CLAUDE_SHARE)):
        raise ValueError(f"each big file must be positive and smaller than its agent's share of {gb} GB")
    began = time.perf_counter()
    rng = random.Random(seed)
    home = _Home(out, rng, Blobs(random.Random(seed + 1)))
    total = gb * 1e9
    sessions = max(20, min(MAX_SESSIONS, round(gb * SESSIONS_PER_GB)))
    claude_count = round(sessions * CLAUDE_SHARE)
    big_claude = _big_claude(home, big_claude_size, CWDS[0])
    big_codex = home.codex_session(
        codex_big_size,
        _big_habits(codex_big_size, heavy_cap=5_000_000),
        cwd=CWDS[1],
        start=BASE_MS + DAY_MS,
    )
    small_claude = _targets(rng, claude_count - 1, total * CLAUDE_SHARE - big_claude_size)
    small_codex = _targets(rng, sessions - claude_count - 1, total * (1 - CLAUDE_SHARE) - codex_big_size)
    planted = set(rng.sample(range(len(small_claude) + len(small_codex)), 3))
    planted_ids = []
    for index, target in enumerate(small_claude + small_codex):
        plant = index in planted
        compact = not plant and rng.random() < 0.05
        habits = Habits(
            rewind=0.0 if plant else 0.03,
            compact_every=max(4_000, target // 2) if compact else 0,
        )
        extra = f"This is about the {PLANTED_PHRASE} job." if plant else ""
        cwd = rng.choice(CWDS)
        if index < len(small_claude):
            written = home.claude_session(target, habits, cwd=cwd, start=session_start(rng), extra=extra)
        else:
            written = home.codex_session(target, habits, cwd=cwd, start=session_start(rng), extra=extra)
        if plant:
            planted_ids.append(written.session_id)
    gemini = _gemini(out, seed, gemini_gb) if gemini_gb else None
    opencode = generate_opencode(out / "opencode", opencode_gb, seed=seed) if opencode_gb else None
    return Corpus(
        root=str(out),
        claude_dir=str(home.claude),
        codex_dir=str(home.codex),
        claude_files=home.counts["claude"][0],
        claude_bytes=home.counts["claude"][1],
        codex_files=home.counts["codex"][0],
        codex_bytes=home.counts["codex"][1],
        big_claude=big_claude,
        big_codex=big_codex,
        planted=tuple(sorted(planted_ids)),
        seconds=time.perf_counter() - began,
        gemini_dir=None if gemini is None else str(gemini[0].gemini),
        gemini_files=0 if gemini is None else gemini[0].counts["gemini"][0],
        gemini_bytes=0 if gemini is None else gemini[0].counts["gemini"][1],
        big_gemini=None if gemini is None else gemini[1],
        opencode=opencode,
    )


def _gemini(out: Path, seed: int, gb: float) -> tuple[_Home, SessionFile]:
    """About `gb` GB of Gemini CLI sessions in `out/gemini`, from random streams of their own; the big one."""
    rng = random.Random(seed + 2)
    home = _Home(out, rng, Blobs(random.Random(seed + 3)))
    total = gb * 1e9
    big_size = int(total * BIG_GEMINI_SHARE)
    habits = _big_habits(big_size, heavy_cap=3_000_000)
    big = home.gemini_session(big_size, habits, cwd=CWDS[2], start=BASE_MS + 2 * DAY_MS)
    sessions = max(2, min(MAX_SESSIONS, round(gb * SESSIONS_PER_GB)))
    for target in _targets(rng, sessions - 1, total - big_size):
        compact = rng.random() < 0.05
        habits = Habits(rewind=0.03, compact_every=max(4_000, target // 2) if compact else 0)
        home.gemini_session(target, habits, cwd=rng.choice(CWDS), start=session_start(rng))
    return home, big


def double_largest(corpus: Corpus, out: Path, seed: int = 0) -> Corpus:
    """The same home in `out` (hard links), except that its largest file is twice as long.

    That is the big Claude Code transcript, or the OpenCode database where it is larger: the
    database is written again with the same sessions but its big one longer by the database's
    size (the rows of the other sessions are the same).
    """
    for name in ("claude", "codex", "gemini", "opencode"):
        if (Path(corpus.root) / name).is_dir():
            shutil.copytree(Path(corpus.root) / name, out / name, copy_function=os.link)
    moved = _moved(corpus, out)
    if corpus.opencode is not None and moved.opencode is not None and corpus.database_is_largest:
        asked = corpus.opencode
        shutil.rmtree(moved.opencode.dir)
        longer = asked.big_gb + asked.bytes / 1e9
        return replace(moved, opencode=generate_opencode(Path(moved.opencode.dir), asked.gb, asked.seed, big_gb=longer))
    copy = Path(moved.big_claude.path)
    copy.unlink()
    rng = random.Random(seed)
    home = _Home(out, rng, Blobs(random.Random(seed + 1)))
    session = corpus.big_claude.session_id.partition(":")[2].encode()
    doubled = _big_claude(home, 2 * corpus.big_claude.bytes, corpus.big_claude.cwd, session_id=session)
    return replace(
        moved, claude_bytes=corpus.claude_bytes + doubled.bytes - corpus.big_claude.bytes, big_claude=doubled
    )


def _moved(corpus: Corpus, out: Path) -> Corpus:
    """`corpus` with every path under `out` instead of its root."""

    def at(path: str) -> str:
        return str(out / Path(path).relative_to(corpus.root))

    def moved(written: SessionFile) -> SessionFile:
        return replace(written, path=at(written.path))

    opencode = corpus.opencode
    return replace(
        corpus,
        root=str(out),
        claude_dir=at(corpus.claude_dir),
        codex_dir=at(corpus.codex_dir),
        big_claude=moved(corpus.big_claude),
        big_codex=moved(corpus.big_codex),
        gemini_dir=None if corpus.gemini_dir is None else at(corpus.gemini_dir),
        big_gemini=None if corpus.big_gemini is None else moved(corpus.big_gemini),
        opencode=None
        if opencode is None
        else replace(opencode, dir=at(opencode.dir), database=at(opencode.database), big=moved(opencode.big)),
    )


def append_claude(path: Path, size: int, marker: str, seed: int = 0) -> int:
    """Append about `size` bytes of turns to a transcript, chained onto its last record; the first
    prompt carries `marker`. Returns the bytes appended."""
    last = last_chain_record(path)
    rng = random.Random(seed)
    clock = Clock(BASE_MS)
    clock.ms = _iso_ms(str(last["timestamp"])) + 1000
    texts = Texts(rng, rng.choice(TOPICS))
    head = str(last["uuid"]).encode()
    with path.open("ab", buffering=_BUFFER) as out:
        writer = ClaudeWriter(
            out,
            rng,
            Blobs(random.Random(seed + 1), count=40),
            texts,
            session_id=str(last["sessionId"]).encode(),
            cwd=str(last["cwd"]),
            clock=clock,
            habits=Habits(rewind=0.0),
            head=head,
        )
        writer.fill(size, marker)
    return writer.written


def write_claude_session(base: Path, size: int, seed: int = 0, cwd: str = CWDS[2]) -> SessionFile:
    """One Claude Code transcript of about `size` bytes in the home `base`."""
    rng = random.Random(seed)
    home = _Home(base.parent, rng, Blobs(random.Random(seed + 1), count=40), claude=base)
    return home.claude_session(size, Habits(rewind=0.0), cwd=cwd, start=session_start(rng))


def _iso_ms(stamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
