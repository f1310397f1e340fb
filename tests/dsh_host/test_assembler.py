"""StreamAssembler: how streamed chunks become the blocks of one assistant message."""

from __future__ import annotations

import pytest

from dsh_host.models.assembler import AssembledMessage, StreamAssembler
from dsh_host.models.scripted import max_tokens_response, text_response, tool_call_response


def assemble(chunks: list[dict]) -> AssembledMessage:
    assembler = StreamAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler.finish()


def test_text_response_assembles_to_its_text_usage_and_stop():
    message = assemble(text_response("ok"))
    assert message == AssembledMessage(
        content=[{"type": "text", "text": "ok"}],
        usage={"inputTokens": 10, "outputTokens": 2},
        finish={"kind": "stop"},
        replay_state=None,
    )


def test_tool_call_response_assembles_text_then_call():
    message = assemble(tool_call_response("c1", "read", {"path": "a.txt"}, "looking"))
    assert message.content == [
        {"type": "text", "text": "looking"},
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"path":"a.txt"}'},
    ]
    assert message.finish == {"kind": "tool-calls"}
    assert assemble(max_tokens_response("cut")).finish == {"kind": "max-tokens"}


def test_blocks_come_out_in_first_seen_index_order():
    message = assemble(
        [
            {"type": "block-start", "index": 3, "blockType": "text"},
            {"type": "block-start", "index": 1, "blockType": "reasoning"},
            {"type": "reasoning-delta", "index": 1, "text": "hmm"},
            {"type": "text-delta", "index": 3, "text": "hi"},
            {"type": "block-end", "index": 1, "block": {"type": "reasoning", "text": "hmm"}},
            {"type": "block-end", "index": 3, "block": {"type": "text", "text": "hi"}},
        ]
    )
    assert message.content == [{"type": "text", "text": "hi"}, {"type": "reasoning", "text": "hmm"}]


def test_block_end_is_authoritative_and_the_first_close_wins():
    message = assemble(
        [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "draft"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "final"}},
            {"type": "text-delta", "index": 0, "text": " ignored"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "second close"}},
        ]
    )
    assert message.content == [{"type": "text", "text": "final"}]


def test_a_block_end_alone_makes_a_block():
    block = {"type": "tool-call", "id": "x", "name": "n", "arguments": "{}"}
    assert assemble([{"type": "block-end", "index": 0, "block": block}]).content == [block]


def test_unclosed_text_and_reasoning_are_concatenated():
    message = assemble(
        [
            {"type": "block-start", "index": 0, "blockType": "reasoning"},
            {"type": "reasoning-delta", "index": 0, "text": "a"},
            {"type": "reasoning-delta", "index": 0, "text": "b"},
            {"type": "text-delta", "index": 1, "text": "c"},
            {"type": "text-delta", "index": 1, "text": "d"},
        ]
    )
    assert message.content == [{"type": "reasoning", "text": "ab"}, {"type": "text", "text": "cd"}]


def test_unclosed_tool_call_takes_last_id_last_nonempty_name_and_all_arguments():
    message = assemble(
        [
            {"type": "block-start", "index": 0, "blockType": "tool-call"},
            {"type": "tool-call-delta", "index": 0, "id": "a", "name": "read", "argumentsDelta": '{"p'},
            {"type": "tool-call-delta", "index": 0, "id": "b", "name": "", "argumentsDelta": '":1}'},
        ]
    )
    assert message.content == [{"type": "tool-call", "id": "b", "name": "read", "arguments": '{"p":1}'}]


def test_unclosed_tool_call_without_id_or_name_gets_defaults():
    message = assemble([{"type": "block-start", "index": 2, "blockType": "tool-call"}])
    assert message.content == [{"type": "tool-call", "id": "call-2", "name": "", "arguments": ""}]


def test_unclosed_block_of_another_type_cannot_be_assembled():
    assembler = StreamAssembler()
    assembler.feed({"type": "block-start", "index": 0, "blockType": "image"})
    with pytest.raises(ValueError, match='cannot assemble incomplete block of type "image"'):
        assembler.finish()


def test_last_usage_wins_and_replay_state_comes_from_finish():
    message = assemble(
        [
            {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}},
            {"type": "usage", "usage": {"inputTokens": 7, "outputTokens": 3}},
            {"type": "finish", "reason": {"kind": "stop"}, "replayState": {"opaque": [1, 2]}},
        ]
    )
    assert message.usage == {"inputTokens": 7, "outputTokens": 3}
    assert message.replay_state == {"opaque": [1, 2]}
    assert message.content == []


def test_missing_finish_counts_as_stop_and_unknown_chunks_are_ignored():
    message = assemble([{"type": "future-chunk", "index": 0}, {"type": "text-delta", "index": 0, "text": "x"}])
    assert message.finish == {"kind": "stop"}
    assert message.usage is None
    assert message.content == [{"type": "text", "text": "x"}]


def test_error_finish_is_kept():
    failure = {"message": "boom", "code": "PROVIDER"}
    message = assemble([{"type": "finish", "reason": {"kind": "error", "failure": failure}}])
    assert message.finish == {"kind": "error", "failure": failure}


def test_the_result_does_not_share_state_with_the_chunks():
    chunks = text_response("ok")
    message = assemble(chunks)
    message.content[0]["text"] = "changed"
    assert chunks[3]["block"]["text"] == "ok"
