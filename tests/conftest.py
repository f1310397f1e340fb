"""Shared fixtures: the reference logs, a hermetic host, and builders for session events."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import Event, SessionHeader, event_from_json
from tests.log_check import violations_under

# The reference implementation's own session logs are another project's test output, so they stay
# outside this repository: beside it at ../shared/fixtures/reference-logs (as in CI), or wherever
# DSH_REFERENCE_LOGS_DIR points (a git worktree elsewhere, say). A clone on its own has neither:
# the tests that read them skip, unless DSH_REQUIRE_REFERENCE_LOGS asks for a failure (.ci/run).
REFERENCE_LOGS_ENV = "DSH_REFERENCE_LOGS_DIR"
REQUIRE_REFERENCE_LOGS = "DSH_REQUIRE_REFERENCE_LOGS"
if os.environ.get(REFERENCE_LOGS_ENV):
    REFERENCE_LOGS_DIR = Path(os.environ[REFERENCE_LOGS_ENV])
    REFERENCE_LOGS_WHERE = f"from ${REFERENCE_LOGS_ENV}"
else:
    REFERENCE_LOGS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "reference-logs"
    REFERENCE_LOGS_WHERE = (
        f"../shared/fixtures/reference-logs beside the repository; ${REFERENCE_LOGS_ENV} names another"
    )
REFERENCE_LOG_PATHS = sorted(REFERENCE_LOGS_DIR.glob("*.jsonl"))

# Property tests check properties, not speed: on a loaded 2-core CI machine a per-example
# deadline or a slow-generation health check would fail them for reasons unrelated to the code.
settings.register_profile("dsh", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dsh")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "foreign_logs: the test stores logs dsh did not write (reference logs, broken logs built on purpose); "
        "the log check at teardown skips it",
    )


@pytest.fixture(autouse=True)
def check_written_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test whose hosts left a log that breaks a log invariant (`tests/log_check.py`).

    Only tests that use `tmp_path` can have written a store, so no other test pays for the check.
    """
    if "tmp_path" not in request.fixturenames or request.node.get_closest_marker("foreign_logs"):
        yield
        return
    root = request.getfixturevalue("tmp_path")  # set up now, so it is torn down after this check
    yield
    violations = violations_under(root)
    if violations:
        pytest.fail("logs written by this test break log invariants:\n" + "\n".join(violations), pytrace=False)


@pytest.fixture(scope="session")
def reference_logs() -> list[Path]:
    """Every reference log (`*.jsonl` under `REFERENCE_LOGS_DIR`), sorted by name.

    The one place a missing corpus is decided: the test skips, naming what is missing and where
    it was looked for, or fails when `DSH_REQUIRE_REFERENCE_LOGS` is set (CI).
    """
    if not REFERENCE_LOG_PATHS:
        missing = f"reference logs missing: no *.jsonl in {REFERENCE_LOGS_DIR} ({REFERENCE_LOGS_WHERE})"
        if os.environ.get(REQUIRE_REFERENCE_LOGS, "") not in ("", "0"):
            pytest.fail(f"{missing}; {REQUIRE_REFERENCE_LOGS} is set, so they are required")
        pytest.skip(missing)
    return REFERENCE_LOG_PATHS


@pytest.fixture
def reference_log(request: pytest.FixtureRequest, reference_logs: list[Path]) -> Path:
    """One reference log; a test taking it runs once per log (see `pytest_generate_tests`)."""
    return request.param


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `reference_log` by the corpus, one case per log named by its stem.

    Without the corpus there is one case, `corpus-missing`, which `reference_logs` skips (or fails
    in CI), so the module still collects cleanly.
    """
    if "reference_log" in metafunc.fixturenames:
        ids = [path.stem for path in REFERENCE_LOG_PATHS] or ["corpus-missing"]
        metafunc.parametrize("reference_log", REFERENCE_LOG_PATHS or [None], ids=ids, indirect=True)


def hermetic_env(home: Path) -> dict[str, str]:
    """Environment for a host that keeps its data under `home` and mounts no plugin."""
    return {"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": ""}


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """A host with no plugins whose store lives in `tmp_path`; closed at teardown."""
    started = Host.start(load_config(env=hermetic_env(tmp_path), cwd=tmp_path))
    try:
        yield started
    finally:
        started.close()


class LogBuilder:
    """Events in log form (camelCase JSON), and as `Event` objects, for hand-written logs."""

    USER: ClassVar[dict[str, str]] = {"kind": "user"}
    PROVENANCE: ClassVar[dict[str, str]] = {"provider": "scripted", "model": "scripted-1"}

    @staticmethod
    def text(text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    @staticmethod
    def raw(
        type: str,
        seq: int,
        data: Any = None,
        *,
        op: Any = None,
        sources: Any = None,
        time: int = 0,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"type": type, "seq": seq, "time": time, "data": {} if data is None else data}
        if sources is not None:
            out["sourceEventSeqs"] = sources
        if op is not None:
            out["surfaceOp"] = op
        return out

    @staticmethod
    def replace(start: int, end: int) -> dict[str, Any]:
        return {"op": "replace", "start": start, "end": end}

    @classmethod
    def user_data(cls, text: str, source: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"content": [cls.text(text)], "source": source or cls.USER}

    @classmethod
    def assistant_data(cls, text: str | None, turn: int = 1, step: int = 1, **extra: Any) -> dict[str, Any]:
        content = [] if text is None else [cls.text(text)]
        return {"turn": turn, "step": step, "content": content, "provenance": cls.PROVENANCE, **extra}

    @classmethod
    def tool_result_data(cls, call_id: str, text: str, turn: int = 1, step: int = 1, **extra: Any) -> dict:
        return {
            "turn": turn,
            "step": step,
            "callId": call_id,
            "content": [cls.text(text)],
            "isError": False,
            **extra,
        }

    @classmethod
    def user(cls, seq: int, text: str = "hi", *, op: Any = "append", sources: Any = None) -> dict[str, Any]:
        return cls.raw("user/message", seq, cls.user_data(text), op=op, sources=sources)

    @classmethod
    def assistant(
        cls, seq: int, text: str | None = "ok", *, op: Any = "append", sources: Any = None, turn: int = 1
    ) -> dict[str, Any]:
        return cls.raw("assistant/message", seq, cls.assistant_data(text, turn), op=op, sources=sources)

    @classmethod
    def chunk(cls, seq: int, text: str = "x", *, turn: int = 1, step: int = 1) -> dict[str, Any]:
        chunk = {"type": "text-delta", "index": 0, "text": text}
        return cls.raw("assistant/chunk", seq, {"turn": turn, "step": step, "chunk": chunk})

    @classmethod
    def draw_log(cls, draw: Any, *, max_ops: int = 40) -> tuple[list[dict[str, Any]], list[int], int]:
        """A random valid log for hypothesis (`draw` is `data.draw`).

        Mixes log-only events, appends of every surface type, replaces of random contiguous
        runs (with shuffled provenance that may name extra earlier events) and tool-result
        rewrites. Returns the log, the surface a naive model expects, and the replace count.
        """
        raws: list[dict[str, Any]] = []
        nodes: list[int] = []
        generation = 0
        for _ in range(draw(st.integers(min_value=0, max_value=max_ops))):
            seq = len(raws)
            action = draw(st.sampled_from(["log-only", "append", "append", "replace"]))
            if action == "replace" and nodes:
                lo = draw(st.integers(min_value=0, max_value=len(nodes) - 1))
                hi = draw(st.integers(min_value=lo, max_value=len(nodes) - 1))
                shadowed = nodes[lo : hi + 1]
                extra = draw(st.lists(st.integers(min_value=0, max_value=seq - 1), max_size=3))
                sources = list(dict.fromkeys([*shadowed, *extra]))
                sources = draw(st.permutations(sources))
                target = raws[shadowed[0]]
                if lo == hi and target["type"] == "tool/result" and draw(st.booleans()):
                    data = {**target["data"], "content": [cls.text(f"pruned {seq}")]}
                    raw = cls.raw("tool/result", seq, data, op=cls.replace(nodes[lo], nodes[hi]), sources=sources)
                else:
                    kind = draw(st.sampled_from(["user/message", "assistant/message"]))
                    data = cls.user_data(f"summary {seq}") if kind == "user/message" else cls.assistant_data("s")
                    raw = cls.raw(kind, seq, data, op=cls.replace(nodes[lo], nodes[hi]), sources=sources)
                nodes[lo : hi + 1] = [seq]
                generation += 1
            elif action == "append" or action == "replace":
                kind = draw(
                    st.sampled_from(
                        [
                            "user/message",
                            "assistant/message",
                            "tool/result",
                            "context/message",
                            "steering/message",
                        ]
                    )
                )
                if kind == "assistant/message":
                    raw = cls.assistant(seq, draw(st.sampled_from(["reply", None])))
                elif kind == "tool/result":
                    raw = cls.raw(kind, seq, cls.tool_result_data(f"call-{seq}", "out"), op="append")
                elif kind == "steering/message":
                    raw = cls.raw(kind, seq, {**cls.user_data("steer"), "turn": 1}, op="append")
                else:
                    raw = cls.raw(kind, seq, cls.user_data(f"message {seq}"), op="append")
                nodes.append(seq)
            else:
                raw = cls.chunk(seq, f"c{seq}")
            raws.append(raw)
        return raws, nodes, generation

    @staticmethod
    def events(raws: list[dict[str, Any]]) -> list[Event]:
        """Parse log-form dicts into events (envelope checks only; no surface fold)."""
        return [event_from_json(raw) for raw in raws]

    @staticmethod
    def header(session_id: str = "s", *, created_at: int = 0, cwd: str | None = "/work") -> SessionHeader:
        return SessionHeader(id=session_id, created_at=created_at, cwd=cwd)


@pytest.fixture(scope="session")
def log_builder() -> type[LogBuilder]:
    """Builders for hand-written logs (see `LogBuilder`)."""
    return LogBuilder


# PostgreSQL fixtures (tests/postgres.py) and the per-store parametrization (tests/store_backends.py).
pytest_plugins = ["tests.postgres", "tests.store_backends"]
