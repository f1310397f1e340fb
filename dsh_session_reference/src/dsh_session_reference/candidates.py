"""Ranking sessions a host may offer for an `@` mention."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """A session that can be mentioned: `label` is its latest title, or its id."""

    session_id: str
    label: str
    cwd: str | None
    created_at: int | float

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sessionId": self.session_id, "label": self.label}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        out["createdAt"] = self.created_at
        return out


def rank_candidates(
    records: Iterable[Any], *, target_id: str, target_cwd: str | None, query: str, limit: int
) -> list[Candidate]:
    """Filter and rank listed sessions (newest first already) for the target.

    A record matches when the lower-cased query occurs in its id, cwd or latest title (the
    reference matched id and cwd only). Ranking is stable: same cwd as the target, then no
    cwd, then any other cwd, keeping newest-first order within each group.
    """
    needle = query.lower()
    matched: list[Any] = []
    for record in records:
        if record.id == target_id:
            continue
        if needle and not _matches(record, needle):
            continue
        matched.append(record)
    matched.sort(key=lambda r: _rank(r.cwd, target_cwd))
    return [
        Candidate(r.id, r.title if r.title is not None else r.id, r.cwd, r.created_at)
        for r in matched[:limit]
    ]


def _matches(record: Any, needle: str) -> bool:
    fields: Sequence[str | None] = (record.id, record.cwd, record.title)
    return any(value is not None and needle in value.lower() for value in fields)


def _rank(cwd: str | None, target_cwd: str | None) -> int:
    if cwd is not None and target_cwd is not None and cwd == target_cwd:
        return 0
    if cwd is None:
        return 1
    return 2
