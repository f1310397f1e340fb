"""Shared fixtures: the reference logs and the log check.

Hosts, the command line and log builders come from dsh-host's pytest plugin (`dsh_host.testing`:
`make_host`, `dsh_host`, `dsh_cli`, `log_builder`), as they would in a plugin author's project.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from dsh_host import Host
from dsh_host.testing import private_homes
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
def private_agent_homes(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point `HOME` and every agent-home variable into a temp dir of the test's own, for every test.

    The sources of other agents' sessions are mounted by default: no test may read the
    machine's real `~/.claude` or `~/.codex`. (Not `tmp_path`: requesting it would make every
    test look as if it could have written logs.)
    """
    for variable, value in private_homes(tmp_path_factory.mktemp("home")).items():
        monkeypatch.setenv(variable, value)


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


@pytest.fixture
def host(dsh_host: Host) -> Host:
    """The plain host of `dsh_host.testing` (no plugins, data in `tmp_path`), by this suite's name."""
    return dsh_host


# The per-store parametrization (tests/store_backends.py); the PostgreSQL fixtures it uses come
# from dsh_host.testing's pytest plugin.
pytest_plugins = ["tests.store_backends"]
