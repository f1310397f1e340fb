"""`LogBuilder`: session events in log form (camelCase JSON) for hand-written logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from dsh_host import Event, SessionHeader
from dsh_host.log import event_from_json

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn

    from dsh_host.jsontypes import JsonValue

Content: TypeAlias = "str | list[dict[str, JsonValue]] | None"
"""A message's content as the builders take it: a string is one text block, None no block."""


class LogBuilder:
    """Events in log form (camelCase JSON), and as `Event` objects, for hand-written logs.

    Every builder is a class method: use the class itself (`LogBuilder.user(0, "hi")`). Events
    carry time 0, turn 1 and step 1 unless told otherwise; surface events append themselves
    (`op="append"`) unless given another surface op (`op=LogBuilder.replace(0, 3)`) or None.
    """

    USER: ClassVar[dict[str, str]] = {"kind": "user"}
    PROVENANCE: ClassVar[dict[str, str]] = {"provider": "scripted", "model": "scripted-1"}

    @staticmethod
    def text(text: str) -> dict[str, JsonValue]:
        return {"type": "text", "text": text}

    @staticmethod
    def reasoning(text: str) -> dict[str, JsonValue]:
        return {"type": "reasoning", "text": text}

    @staticmethod
    def plugin(name: str) -> dict[str, str]:
        """The source of a message a plugin wrote."""
        return {"kind": "plugin", "plugin": name}

    @classmethod
    def content(cls, content: Content) -> list[dict[str, JsonValue]]:
        """`content` as blocks (see `Content`)."""
        if content is None:
            return []
        return [cls.text(content)] if isinstance(content, str) else content

    @staticmethod
    def raw(
        type: str,
        seq: int,
        data: JsonValue = None,
        *,
        op: JsonValue = None,
        sources: JsonValue = None,
        time: int = 0,
    ) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"type": type, "seq": seq, "time": time, "data": {} if data is None else data}
        if sources is not None:
            out["sourceEventSeqs"] = sources
        if op is not None:
            out["surfaceOp"] = op
        return out

    @staticmethod
    def replace(start: int, end: int) -> dict[str, JsonValue]:
        return {"op": "replace", "start": start, "end": end}

    @classmethod
    def user_data(
        cls, text: Content, source: dict[str, JsonValue] | None = None, envelope: dict[str, JsonValue] | None = None
    ) -> dict[str, JsonValue]:
        data = {"content": cls.content(text), "source": source or cls.USER}
        if envelope is not None:
            data["envelope"] = envelope
        return data

    @classmethod
    def assistant_data(cls, text: Content, turn: int = 1, step: int = 1, **extra: JsonValue) -> dict[str, JsonValue]:
        return {"turn": turn, "step": step, "content": cls.content(text), "provenance": cls.PROVENANCE, **extra}

    @classmethod
    def tool_result_data(
        cls, call_id: str, text: str, turn: int = 1, step: int = 1, **extra: JsonValue
    ) -> dict[str, JsonValue]:
        return {
            "turn": turn,
            "step": step,
            "callId": call_id,
            "content": [cls.text(text)],
            "isError": False,
            **extra,
        }

    @classmethod
    def user(
        cls,
        seq: int,
        text: Content = "hi",
        source: dict[str, JsonValue] | None = None,
        *,
        envelope: dict[str, JsonValue] | None = None,
        op: JsonValue = "append",
        sources: JsonValue = None,
    ) -> dict[str, JsonValue]:
        """A `user/message` (from the user unless `source` says otherwise)."""
        return cls.raw("user/message", seq, cls.user_data(text, source, envelope), op=op, sources=sources)

    @classmethod
    def steering(
        cls,
        seq: int,
        text: Content,
        source: dict[str, JsonValue] | None = None,
        *,
        turn: int = 1,
        op: JsonValue = "append",
    ) -> dict[str, JsonValue]:
        """A `steering/message` of turn `turn`."""
        return cls.raw("steering/message", seq, {**cls.user_data(text, source), "turn": turn}, op=op)

    @classmethod
    def context(
        cls, seq: int, text: str, source: dict[str, JsonValue], *, op: JsonValue = "append"
    ) -> dict[str, JsonValue]:
        """A `context/message` of one text block."""
        return cls.raw("context/message", seq, {"content": [cls.text(text)], "source": source}, op=op)

    @classmethod
    def assistant(
        cls, seq: int, text: Content = "ok", *, op: JsonValue = "append", sources: JsonValue = None, turn: int = 1
    ) -> dict[str, JsonValue]:
        return cls.raw("assistant/message", seq, cls.assistant_data(text, turn), op=op, sources=sources)

    @classmethod
    def tool_result(
        cls, seq: int, text: str, *, call_id: str = "call-1", op: JsonValue = "append"
    ) -> dict[str, JsonValue]:
        """A `tool/result` of turn 1, step 1."""
        return cls.raw("tool/result", seq, cls.tool_result_data(call_id, text), op=op)

    @classmethod
    def chunk(cls, seq: int, text: str = "x", *, turn: int = 1, step: int = 1) -> dict[str, JsonValue]:
        chunk = {"type": "text-delta", "index": 0, "text": text}
        return cls.raw("assistant/chunk", seq, {"turn": turn, "step": step, "chunk": chunk})

    @classmethod
    def draw_log(cls, draw: DrawFn, *, max_ops: int = 40) -> tuple[list[dict[str, JsonValue]], list[int], int]:
        """A random valid log for hypothesis (`draw` is `data.draw`).

        Mixes log-only events, appends of every surface type, replaces of random contiguous
        runs (with shuffled provenance that may name extra earlier events) and tool-result
        rewrites. Returns the log, the surface a naive model expects, and the replace count.
        """
        # hypothesis is a test-time dependency of whoever calls this, not of dsh-host.
        from hypothesis import strategies as st

        raws: list[dict[str, JsonValue]] = []
        nodes: list[int] = []
        generation = 0
        for _ in range(draw(st.integers(min_value=0, max_value=max_ops))):
            seq = len(raws)
            action = draw(st.sampled_from(["log-only", "append", "append", "replace"]))
            if action == "replace" and nodes:
                lo = draw(st.integers(min_value=0, max_value=len(nodes) - 1))
                hi = draw(st.integers(min_value=lo, max_value=len(nodes) - 1))
                shadowed = nodes[lo : hi + 1]
                extra = draw(st.lists(st.integers(min_value=0, max_value=seq - 1), max_size=3))
                sources = list(dict.fromkeys([*shadowed, *extra]))
                sources = draw(st.permutations(sources))
                target = raws[shadowed[0]]
                if lo == hi and target["type"] == "tool/result" and draw(st.booleans()):
                    data = {**target["data"], "content": [cls.text(f"pruned {seq}")]}
                    raw = cls.raw("tool/result", seq, data, op=cls.replace(nodes[lo], nodes[hi]), sources=sources)
                else:
                    kind = draw(st.sampled_from(["user/message", "assistant/message"]))
                    data = cls.user_data(f"summary {seq}") if kind == "user/message" else cls.assistant_data("s")
                    raw = cls.raw(kind, seq, data, op=cls.replace(nodes[lo], nodes[hi]), sources=sources)
                nodes[lo : hi + 1] = [seq]
                generation += 1
            elif action == "append" or action == "replace":
                kind = draw(
                    st.sampled_from(
                        [
                            "user/message",
                            "assistant/message",
                            "tool/result",
                            "context/message",
                            "steering/message",
                        ]
                    )
                )
                if kind == "assistant/message":
                    raw = cls.assistant(seq, draw(st.sampled_from(["reply", None])))
                elif kind == "tool/result":
                    raw = cls.raw(kind, seq, cls.tool_result_data(f"call-{seq}", "out"), op="append")
                elif kind == "steering/message":
                    raw = cls.raw(kind, seq, {**cls.user_data("steer"), "turn": 1}, op="append")
                else:
                    raw = cls.raw(kind, seq, cls.user_data(f"message {seq}"), op="append")
                nodes.append(seq)
            else:
                raw = cls.chunk(seq, f"c{seq}")
            raws.append(raw)
        return raws, nodes, generation

    @staticmethod
    def surface(log: list[dict[str, JsonValue]], seqs: Sequence[int]) -> list[dict[str, JsonValue]]:
        """The events of `log` at `seqs`, in that order (a surface folded by hand)."""
        by_seq = {event["seq"]: event for event in log}
        return [by_seq[seq] for seq in seqs]

    @staticmethod
    def events(raws: list[dict[str, JsonValue]]) -> list[Event]:
        """Parse log-form dicts into events (envelope checks only; no surface fold)."""
        return [event_from_json(raw) for raw in raws]

    @staticmethod
    def header(session_id: str = "s", *, created_at: int = 0, cwd: str | None = "/work") -> SessionHeader:
        return SessionHeader(id=session_id, created_at=created_at, cwd=cwd)
