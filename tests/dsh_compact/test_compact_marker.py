"""The checkpoint provenance marker: the canonical value and the recognition predicate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dsh_compact import COMPACT_CHECKPOINT_SOURCE, is_compact_checkpoint_source


def test_canonical_value() -> None:
    assert dict(COMPACT_CHECKPOINT_SOURCE) == {"kind": "plugin", "plugin": "compact"}
    with pytest.raises(TypeError):
        COMPACT_CHECKPOINT_SOURCE["plugin"] = "other"  # type: ignore[index]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"kind": "plugin", "plugin": "compact"}, True),
        (COMPACT_CHECKPOINT_SOURCE, True),
        ({"kind": "plugin", "plugin": "compact", "extra": 1}, True),
        ({"kind": "plugin", "plugin": "other"}, False),
        ({"kind": "user"}, False),
        ({"plugin": "compact"}, False),
        ({"kind": "plugin"}, False),
        (None, False),
        ("compact", False),
        ([("kind", "plugin"), ("plugin", "compact")], False),
    ],
)
def test_predicate(source: object, expected: bool) -> None:
    assert is_compact_checkpoint_source(source) is expected


def test_predicate_survives_a_json_round_trip() -> None:
    assert is_compact_checkpoint_source(json.loads(json.dumps(dict(COMPACT_CHECKPOINT_SOURCE))))


def test_importing_the_marker_loads_nothing_else() -> None:
    code = (
        "import sys, dsh_compact.marker, dsh_compact;"
        "print(sorted(m for m in sys.modules if m.startswith(('dsh_', 'pluggy', 'click'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "['dsh_compact', 'dsh_compact.marker']"
