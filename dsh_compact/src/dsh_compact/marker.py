"""The canonical checkpoint provenance marker.

Kept in a module of its own, importing nothing else from the package, so that consumers such as
session references can recognise checkpoints without loading the compaction machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

COMPACT_CHECKPOINT_SOURCE: Mapping[str, str] = MappingProxyType({"kind": "plugin", "plugin": "compact"})
"""The `source` every compaction backend puts on its checkpoint `user/message`."""


def is_compact_checkpoint_source(source: object) -> bool:
    """True iff `source` is `{"kind": "plugin", "plugin": "compact"}` (other keys are ignored).

    Only these two fields are checked: not the event type, the surface op, the content or the
    backend, so the predicate survives persistence, cloning and JSON round trips.
    """
    return isinstance(source, Mapping) and source.get("kind") == "plugin" and source.get("plugin") == "compact"
