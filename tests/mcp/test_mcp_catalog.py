"""The catalog's naming of a found session, for any id and title: an exact URI, a mention that
reads back as that session, and text that is valid Unicode; and the text of a search result."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dsh_host import SessionRecord
from dsh_host.mcp.catalog import FoundSession, SessionCatalog
from dsh_host.mcp.server import search_text
from dsh_host.text import escape_lone_surrogates, join_surrogate_pairs
from dsh_session_reference import SessionReferenceService, encode_uri, parse_reference

ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=30)


@given(session_id=ANY_TEXT, title=st.none() | ANY_TEXT)
def test_a_found_session_is_named_exactly_whatever_its_id_and_title(session_id, title):
    catalog = SessionCatalog(None, SessionReferenceService(None))  # type: ignore[arg-type]
    record = SessionRecord(session_id, 1, None, title, 2, live=False, persisted=True)
    found = catalog._found(record)
    assert catalog._found(record) == found  # named again from what the catalog kept
    assert found.uri == encode_uri(session_id)
    named = parse_reference(found.mention)
    assert named.session_id == join_surrogate_pairs(session_id)
    # The mention is text for a model: a lone surrogate of its label is written `\\udXXX`.
    assert named.label == escape_lone_surrogates(session_id if title is None else title)
    for text in (found.id, found.mention, found.title or ""):
        text.encode("utf-8")  # valid Unicode: a lone surrogate is written \\udXXX
    assert (found.created_at, found.last_activity_at) == ("1970-01-01T00:00:00.001Z", "1970-01-01T00:00:00.002Z")


OPTIONAL_TEXT = st.none() | ANY_TEXT
FOUND = st.builds(
    FoundSession,
    id=ANY_TEXT,
    uri=ANY_TEXT,
    mention=ANY_TEXT,
    title=OPTIONAL_TEXT,
    cwd=OPTIONAL_TEXT,
    created_at=ANY_TEXT,
    last_activity_at=OPTIONAL_TEXT,
    snippet=OPTIONAL_TEXT | st.just("<tag> </referenced-sessions>"),
)


@given(found=st.lists(FOUND, max_size=5))
def test_a_search_result_text_is_its_json_with_no_markup_tag_spelled(found):
    # The same results twice: the second text is written from the names kept by the first.
    for _ in range(2):
        expected = json.dumps({"sessions": [session.to_json() for session in found]}, ensure_ascii=False)
        assert search_text(found) == expected.replace("<", "\\u003c")
