"""Fit one referenced session's data object into its byte budget.

The budget is the UTF-8 size of the source's tag-safe JSON object. Whole old messages go first
(never a checkpoint, never the newest message), then the largest texts are cut to head + tail
with an inline notice. Sizes are kept as a running total of per-message contributions, so a
long session costs one serialization per message instead of one per dropped message; the
result is byte-identical to re-serializing the object after every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_retention import retain_head_tail, utf8_length
from dsh_session_reference.errors import ErrorCode, SessionReferenceError
from dsh_session_reference.jsjson import tag_safe_json
from dsh_session_reference.projection import ProjectedSource, Role

if TYPE_CHECKING:
    from dsh_host.hookspecs import JsonValue

BUDGET_EXCEEDED_MESSAGE = "referenced session snapshot cannot fit the configured byte budget"


@dataclass(frozen=True)
class TruncatedText:
    """A shortened text and the UTF-8 bytes of the original it no longer holds."""

    text: str
    omitted: int


@dataclass(frozen=True)
class RetentionStats:
    """What retention did to one source; reported in the model-hidden meta only."""

    compacted: bool
    original_messages: int
    retained_messages: int
    omitted_messages: int
    omitted_bytes: int

    @property
    def truncated(self) -> bool:
        """Whether anything at all was left out."""
        return self.omitted_messages > 0 or self.omitted_bytes > 0


@dataclass(frozen=True)
class ConversationEntry:
    """One retained message as the model sees it."""

    role: Role
    text: str


@dataclass(frozen=True)
class RetainedSource:
    """A source's model-visible data after retention, and the statistics of the cut."""

    session_id: str
    label: str
    cwd: str | None
    captured_through_seq: int | None
    conversation: tuple[ConversationEntry, ...]
    stats: RetentionStats

    def to_data(self) -> dict[str, JsonValue]:
        """The model-visible per-source object, keys in contract order."""
        return source_data(self.session_id, self.label, self.cwd, self.captured_through_seq, self.conversation)


def source_data(
    session_id: str,
    label: str,
    cwd: str | None,
    captured_through_seq: int | None,
    conversation: tuple[ConversationEntry, ...] | list[ConversationEntry],
) -> dict[str, JsonValue]:
    """Build the per-source object ``{sessionId, label, cwd, capturedThroughSeq, conversation}``."""
    return {
        "sessionId": session_id,
        "label": label,
        "cwd": cwd,
        "capturedThroughSeq": captured_through_seq,
        "conversation": [{"role": entry.role, "text": entry.text} for entry in conversation],
    }


def truncate_with_notice(text: str, max_out: int) -> TruncatedText:
    """Cut ``text`` to at most ``max_out`` UTF-8 bytes: head + tail + an omission notice.

    The search is a plain binary search over the retained byte count, kept step for step as
    the reference does it: where a dropped U+FEFF makes the fit test non-monotone, any other
    search would settle on different text. When not even the notice fits, the result is empty.
    """
    total = utf8_length(text)
    if total <= max_out:
        return TruncatedText(text, 0)
    best = TruncatedText("", total)
    low, high = 0, max_out
    while low <= high:
        retained = (low + high) // 2
        head = (retained + 1) // 2
        kept = retain_head_tail(text, head, retained - head)
        omitted = kept.omitted.count
        candidate = f"{kept.text}\n[… omitted {omitted} UTF-8 bytes …]"
        if utf8_length(candidate) <= max_out:
            best = TruncatedText(candidate, omitted)
            low = retained + 1
        else:
            high = retained - 1
    return best


def retain_source(source: ProjectedSource, label: str, max_bytes: int) -> RetainedSource:
    """Shrink ``source`` until its tag-safe JSON object takes at most ``max_bytes`` bytes.

    Raises ``SessionReferenceError`` (``BUDGET_EXCEEDED``) when even dropping and truncating
    everything allowed cannot make it fit.
    """
    roles, texts = source.roles, source.texts
    newest = len(texts) - 1
    empty = source_data(source.session_id, label, source.cwd, source.captured_through_seq, ())
    # The object is `...[` + items joined by "," + `]}`; items slot into the empty object.
    size = _Size(utf8_length(tag_safe_json(empty)), 0, 0)
    kept_at: dict[int, _Item] = {}
    # Checkpoints and the newest message are never dropped.
    for index in [*source.checkpoints, newest] if texts else []:
        if index not in kept_at:
            kept_at[index] = item = _Item(roles[index], texts[index])
            size.add(item.size)
    # Phase 1 drops the oldest droppable messages until the object fits, so the droppable
    # messages that stay are the longest run of the newest ones that fits: walk back from the
    # newest, and size only the messages that may stay (dropped ones only need their length).
    for index in range(newest - 1, -1, -1):
        if index in kept_at:
            continue  # a checkpoint
        item = _Item(roles[index], texts[index])
        if size.total_with(item.size) > max_bytes:
            break
        kept_at[index] = item
        size.add(item.size)
    kept = [kept_at[index] for index in sorted(kept_at)]
    omitted_messages = len(texts) - len(kept)
    # UTF-8 length is additive (lone surrogates count 3 bytes each wherever they stand), so the
    # dropped messages' bytes are the whole conversation's less the kept ones'.
    dropped_bytes = source.text_bytes - sum(item.original_bytes for item in kept)
    while size.total > max_bytes:
        largest = max(kept, key=lambda item: item.text_bytes, default=None)
        if largest is None or largest.text_bytes == 0:
            raise _cannot_fit()
        target = max(0, largest.text_bytes - (size.total - max_bytes))
        shortened = truncate_with_notice(largest.original, target)
        if shortened.text == largest.text:
            raise _cannot_fit()
        previous_size = largest.size
        largest.replace_text(shortened)
        size.resize(previous_size, largest.size)

    stats = RetentionStats(
        compacted=source.compacted,
        original_messages=len(texts),
        retained_messages=len(kept),
        omitted_messages=omitted_messages,
        omitted_bytes=dropped_bytes + sum(item.omitted_bytes for item in kept),
    )
    conversation = tuple(ConversationEntry(item.role, item.text) for item in kept)
    return RetainedSource(source.session_id, label, source.cwd, source.captured_through_seq, conversation, stats)


class _Item:
    """A message being retained: its current text and that text's serialized contribution."""

    def __init__(self, role: Role, text: str) -> None:
        self.role = role
        self.original = text
        self.omitted_bytes = 0
        self._set_text(text)
        self.original_bytes = self.text_bytes

    def replace_text(self, shortened: TruncatedText) -> None:
        self.omitted_bytes = shortened.omitted
        self._set_text(shortened.text)

    def _set_text(self, text: str) -> None:
        self.text = text
        self.text_bytes, quoted_bytes = _sizes(text)
        self.size = _ENTRY_OVERHEAD[self.role] + quoted_bytes


# `{"role":"<role>","text":` + the text as a JSON string + `}`: only the string varies.
_ENTRY_OVERHEAD = {
    role: utf8_length(tag_safe_json({"role": role, "text": ""})) - len('""') for role in ("user", "assistant")
}


# JSON.stringify escapes `"`, `\` and the control characters below U+0020: these five with a
# letter (`\n`), the others as `\u00XX`. Everything else it writes as it is, but for lone
# surrogates, which UTF-8 cannot encode.
_NOT_CONTROL = bytes(range(0x20, 0x100))
_LETTER_ESCAPED = b"\b\t\n\f\r"


def _sizes(text: str) -> tuple[int, int]:
    """UTF-8 sizes of ``text`` (as JavaScript counts it) and of ``text`` as a tag-safe JSON string.

    The second without serializing: every character JSON escapes is ASCII, so the escapes are
    counted on the UTF-8 bytes (one C pass each) and add to their size. ``"``, ``\\`` and the
    letter escapes take one byte more, other controls five (``\\u00XX``), and each ``<``
    five (``\\u003c``). Text with a surrogate code point takes the generic path.
    """
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return utf8_length(text), utf8_length(tag_safe_json(text))
    size = len(encoded)
    extra = encoded.count(b'"') + encoded.count(b"\\") + 5 * encoded.count(b"<")
    controls = encoded.translate(None, _NOT_CONTROL)
    if controls:
        lettered = len(controls) - len(controls.translate(None, _LETTER_ESCAPED))
        extra += lettered + 5 * (len(controls) - lettered)
    return size, size + 2 + extra


class _Size:
    """The serialized object's size from its fixed part, the item sizes and the commas."""

    def __init__(self, fixed: int, items: int, count: int) -> None:
        self._fixed = fixed
        self._items = items
        self._count = count

    @property
    def total(self) -> int:
        return self._fixed + self._items + max(0, self._count - 1)

    def add(self, item_size: int) -> None:
        self._items += item_size
        self._count += 1

    def total_with(self, item_size: int) -> int:
        """The total if one more item of `item_size` were added."""
        return self._fixed + self._items + item_size + self._count

    def resize(self, old: int, new: int) -> None:
        self._items += new - old


def _cannot_fit() -> SessionReferenceError:
    return SessionReferenceError(ErrorCode.BUDGET_EXCEEDED, BUDGET_EXCEEDED_MESSAGE)
