"""Ranking sessions a host may offer for an `@` mention."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_host import CandidateRow, SessionRecord
    from dsh_host.hookspecs import JsonValue


@dataclass(frozen=True)
class Candidate:
    """A session that can be mentioned: `label` is its latest title, or its id.

    `snippet` is set when the session matched on what was said in it: a short excerpt around
    the match, raw text (display it with `display_inline_text`). `agent` names the other agent
    keeping the session (a source's display name, `Claude Code`); None for dsh's own.
    """

    session_id: str
    label: str
    cwd: str | None
    created_at: int | float
    snippet: str | None = None
    agent: str | None = None

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"sessionId": self.session_id, "label": self.label}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        out["createdAt"] = self.created_at
        if self.snippet is not None:
            out["snippet"] = self.snippet
        if self.agent is not None:
            out["agent"] = self.agent
        return out


def candidate_of(row: CandidateRow, agent: str | None = None) -> Candidate:
    """The candidate for a found session (a `CandidateRow`), kept by `agent` (None: dsh)."""
    label = row.title if row.title is not None else row.id
    return Candidate(row.id, label, row.cwd, row.created_at, row.snippet, agent)


def rank_candidates(
    records: Iterable[SessionRecord], *, target_id: str, target_cwd: str | None, query: str, limit: int
) -> list[Candidate]:
    """Filter and rank listed sessions (newest first already) for the target.

    A record matches when the lower-cased query occurs in its id, cwd or latest title (the
    reference matched id and cwd only). Ranking is stable: same cwd as the target, then no
    cwd, then any other cwd, keeping newest-first order within each group.
    """
    needle = query.lower()
    # One bucket per rank, filled in listing order: concatenated, they are the stable sort.
    same: list[SessionRecord] = []
    cwdless: list[SessionRecord] = []
    others: list[SessionRecord] = []
    for record in records:
        if record.id == target_id:
            continue
        cwd = record.cwd
        if needle and not (
            needle in record.id.lower()
            or (cwd is not None and needle in cwd.lower())
            or (record.title is not None and needle in record.title.lower())
        ):
            continue
        if cwd is None:
            cwdless.append(record)
        elif target_cwd is not None and cwd == target_cwd:
            same.append(record)
            if len(same) >= limit:
                break  # nothing after this record can rank before it
        else:
            others.append(record)
    ranked = (same + cwdless + others)[:limit]
    # A store's own rows (a `SessionRow` ranks too) carry no agent: they are dsh's sessions.
    return [
        Candidate(r.id, r.title if r.title is not None else r.id, r.cwd, r.created_at, agent=getattr(r, "agent", None))
        for r in ranked
    ]
