"""Reading JSON lines in blocks gives what reading them one by one gives; timestamps read fast read the same."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_sources import lines as lines_module
from dsh_sources.lines import JsonDocument, JsonLines
from dsh_sources.transcript import LatestTime, iso_ms

PIECES = st.sampled_from(
    [b'{"a": 1}', b'{"b": "xyz"}', b"[1]", b"not json", b"", b"  ", b'{"c": {"d": [1, 2]}}', b'{"e']
)


def reference(data: bytes, limit: int) -> tuple[list[object], int, int, int, bool]:
    *whole, tail = data.split(b"\n")
    records: list[object] = []
    skipped = oversized = 0
    for line in whole:
        if len(line) > limit:
            skipped, oversized = skipped + 1, oversized + 1
            continue
        try:
            record = json.loads(line.decode("utf-8", "surrogatepass"))
        except ValueError:
            skipped += bool(line.strip())
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            skipped += 1
    return records, skipped, oversized, len(data) - len(tail), len(tail) > limit or bool(tail.strip())


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.tuples(PIECES, st.booleans()), max_size=12),
    limit=st.integers(1, 40),
    block=st.integers(1, 50),
)
def test_block_reads_equal_line_reads(monkeypatch_module, pieces, limit, block):
    monkeypatch_module.setattr(lines_module, "_BLOCK_BYTES", block)
    data = b"".join(piece + (b"\n" if ended else b"") for piece, ended in pieces)
    read = JsonLines(io.BytesIO(data), limit=limit)
    records = list(read)
    assert (records, read.skipped, read.oversized, read.consumed, read.unfinished) == reference(data, limit)


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)))
def test_the_agents_timestamp_form_is_read_as_the_general_parser_reads_it(moment):
    canonical = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    general = datetime.fromisoformat(canonical[:-1] + "+00:00")
    assert iso_ms(canonical) == (general - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)
    assert iso_ms(canonical.replace("T", " ")) == iso_ms(canonical)  # the general parser's answer, the same


def _general(text: str) -> int | None:
    """What the general parser makes of a timestamp ending in `Z` (None: no moment)."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00")
    except ValueError:
        return None
    return max(0, (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=datetime(1969, 12, 31), max_value=datetime(2200, 1, 1)),
            st.lists(st.tuples(st.integers(0, 22), st.sampled_from("0123456789:.TZa \u0663")), max_size=2),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_timestamps_in_a_row_are_read_as_the_general_parser_reads_them(stamps):
    """Records come seconds apart and share their minute (which iso_ms works out once); a changed
    character anywhere makes a timestamp the general parser reads differently or not at all."""
    for moment, changes in stamps:
        text = list(moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z")
        for place, char in changes:
            text[place] = char
        stamp = "".join(text)
        assert iso_ms(stamp) == _general(stamp), stamp


@settings(max_examples=300, deadline=None)
@given(
    stamps=st.lists(
        st.one_of(
            st.tuples(
                st.datetimes(min_value=datetime(1969, 12, 31), max_value=datetime(2200, 1, 1)),
                st.lists(st.tuples(st.integers(0, 23), st.sampled_from("0123456789:.TZa \u0663")), max_size=2),
            ),
            st.sampled_from([None, 7, "", "yesterday", "2025-02-30T00:00:00.000Z", "2025-01-01T10:00:00+02:00"]),
        ),
        max_size=12,
    ),
    start=st.one_of(st.none(), st.integers(0, 2**42)),
)
def test_the_latest_time_is_the_latest_of_the_timestamps_read_one_by_one(stamps, start):
    """`LatestTime` checks most timestamps by their order as strings: it must find what working each out finds."""
    latest, expected = LatestTime(start), start
    for item in stamps:
        if isinstance(item, tuple):
            moment, changes = item
            text = list(moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z")
            for place, char in changes:
                text[place] = char
            item = "".join(text)
        latest.see(item)
        time = iso_ms(item)
        if time is not None and (expected is None or time > expected):
            expected = time
    assert latest.ms() == expected


def test_timestamps_that_are_no_moment_are_none():
    for text in (
        "2025-13-01T00:00:00.000Z",
        "2025-02-30T00:00:00.000Z",
        "2025-01-01T24:00:00.000Z",
        "2025-01-01T00:60:00.000Z",
        "2025-01-01T00:00:60.000Z",
        "2025-01-01T0a:00:00.000Z",
        "2025-01-01T00:00:00.000",
        "",
        "yesterday",
    ):
        assert iso_ms(text) is None, text


def test_a_whole_json_document_is_one_record_or_one_skipped_line_and_an_oversized_one_is_not_held():
    pretty = json.dumps({"sessionId": "s", "messages": [{"id": "m", "content": "a\nb"}]}, indent=2).encode()
    document = JsonDocument(io.BytesIO(pretty))
    assert list(document) == [json.loads(pretty)]
    assert (document.skipped, document.oversized, document.consumed, document.unfinished) == (0, 0, len(pretty), False)
    for data, skipped in ((b"[1, 2]", 1), (pretty[:-3], 1), (b"  \n", 0)):
        document = JsonDocument(io.BytesIO(data))
        assert list(document) == [] and (document.skipped, document.consumed) == (skipped, len(data))
    big = JsonDocument(io.BytesIO(pretty), limit=10)
    assert list(big) == [] and (big.skipped, big.oversized, big.consumed) == (1, 1, len(pretty))
