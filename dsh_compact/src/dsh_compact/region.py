"""Choosing what to compact: a head-anchored run of the surface that leaves a retained tail.

The range always starts at the surface head, which may be an earlier checkpoint: it is merged
into the new summary, so automatic compaction keeps at most one checkpoint. The tail kept is the
shortest suffix costing at least the retain budget, grown toward the head until the cut in front
of it splits no tool-call/result pair.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh_compact.errors import CompactionError
from dsh_compact.meter import Measurement
from dsh_compact.pairing import balanced_cuts
from dsh_host import Session


@dataclass(frozen=True)
class SurfaceRange:
    """A run of surface nodes named by its first and last seq.

    These are surface positions, not a numeric interval: after a replace `start` can be a larger
    seq than `end`.
    """

    start: int
    end: int


def select_compactable_range(session: Session, measurement: Measurement, retain_tokens: int) -> SurfaceRange | None:
    """The range to compact so that at least `retain_tokens` stay, or None if nothing can go.

    `measurement` must price the session's current surface, node for node.
    """
    nodes = measurement.nodes
    if not nodes:
        return None
    if [node.seq for node in nodes] != session.surface.nodes:
        raise CompactionError("compaction: token-meter surface does not match the current session surface")
    keep_from = len(nodes)
    kept = 0
    while keep_from > 0:
        keep_from -= 1
        kept += nodes[keep_from].tokens
        if kept >= retain_tokens:
            break
    if keep_from == 0:
        return None
    balanced = balanced_cuts(session)
    while keep_from > 0 and not balanced[keep_from]:
        keep_from -= 1
    if keep_from == 0:
        return None
    return SurfaceRange(nodes[0].seq, nodes[keep_from - 1].seq)
