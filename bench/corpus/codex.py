"""Codex CLI rollouts, written line by line from byte templates.

Each line is `{"timestamp", "type", "payload"}`: `session_meta` first, then per turn a
`turn_context`, the prompt as a `response_item` message and its `event_msg` copy
(`user_message`), reasoning items, `function_call`s and their `function_call_output`s (where
most bytes are), `token_count` events, and the reply as an `agent_message` event and an
assistant message. Now and then a `compacted` record replaces the history (with its
`replacement_history`), or a `thread_rolled_back` event drops the last turn.
"""

from __future__ import annotations

import base64
import random
from typing import BinaryIO

from bench.corpus.material import Blobs, Clock, Habits, SessionWriter, Texts

_META = (
    b'{"timestamp":"%s","type":"session_meta","payload":{"id":"%s","timestamp":"%s","cwd":"%s",'
    b'"originator":"codex_cli_rs","cli_version":"0.63.0","instructions":null,"source":"cli",'
    b'"model_provider":"openai","base_instructions":{"text":"You are Codex, a coding agent running in a terminal. '
    b'Be concise, run the tests you touch, and explain what you changed."},'
    b'"git":{"commit_hash":"%s","branch":"main","repository_url":"git@example.com:dev/project.git"}}}\n'
)
_CONTEXT = (
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"message","role":"developer","content":'
    b'[{"type":"input_text","text":"<permissions instructions>Filesystem sandboxing: workspace-write; network '
    b'access is restricted.</permissions instructions>"}]}}\n'
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"message","role":"user","content":'
    b'[{"type":"input_text","text":"<environment_context>\\n  <cwd>%s</cwd>\\n  <shell>bash</shell>\\n'
    b'</environment_context>"}]}}\n'
)
_TURN_CONTEXT = (
    b'{"timestamp":"%s","type":"turn_context","payload":{"cwd":"%s","approval_policy":"on-request",'
    b'"sandbox_policy":{"type":"workspace-write","network_access":false,"exclude_tmpdir_env_var":false,'
    b'"exclude_slash_tmp":false},"model":"gpt-5.1-codex","effort":"medium","summary":"auto"}}\n'
)
_PROMPT = (
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"message","role":"user","content":'
    b'[{"type":"input_text","text":"%s"}]}}\n'
    b'{"timestamp":"%s","type":"event_msg","payload":{"type":"user_message","message":"%s","images":[],'
    b'"local_images":[],"text_elements":[]}}\n'
)
_REASONING = (
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text",'
    b'"text":"**Planning**\\n\\n%s"}],"content":null,"encrypted_content":"%s"}}\n'
    b'{"timestamp":"%s","type":"event_msg","payload":{"type":"agent_reasoning","text":"**Planning**\\n\\n%s"}}\n'
)
_CALL = (
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"function_call","name":"shell_command",'
    b'"arguments":"{\\"command\\":\\"%s\\",\\"workdir\\":\\"%s\\"}","call_id":"call_%s"}}\n'
)
_OUTPUT = (
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"function_call_output","call_id":"call_%s",'
    b'"output":"Exit code: 0\\nWall time: %d.%d seconds\\nOutput:\\n%s"}}\n'
)
_TOKENS = (
    b'{"timestamp":"%s","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":'
    b'{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d,"reasoning_output_tokens":%d,"total_tokens":%d},'
    b'"last_token_usage":{"input_tokens":%d,"cached_input_tokens":0,"output_tokens":%d,"reasoning_output_tokens":0,'
    b'"total_tokens":%d},"model_context_window":258400},"rate_limits":{"primary":{"used_percent":%d.0,'
    b'"window_minutes":300,"resets_at":%d},"secondary":null}}}\n'
)
_REPLY = (
    b'{"timestamp":"%s","type":"event_msg","payload":{"type":"agent_message","message":"%s"}}\n'
    b'{"timestamp":"%s","type":"response_item","payload":{"type":"message","role":"assistant","content":'
    b'[{"type":"output_text","text":"%s"}],"phase":"final_answer"}}\n'
)
_KEPT = b'{"type":"message","role":"user","content":[{"type":"input_text","text":"%s"}]}'
_SUMMARY_LEAD = (
    b"Another language model started to solve this problem and produced a summary of its thinking process.\\n"
)
_COMPACTED = (
    b'{"timestamp":"%s","type":"compacted","payload":{"message":"%s","replacement_history":[%s]}}\n'
    b'{"timestamp":"%s","type":"event_msg","payload":{"type":"context_compacted"}}\n'
)
_ROLLBACK = b'{"timestamp":"%s","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}\n'


class CodexWriter(SessionWriter):
    """Writes one Codex rollout to `out`, counting the bytes written."""

    def __init__(
        self, out: BinaryIO, rng: random.Random, blobs: Blobs, texts: Texts, *, cwd: str, clock: Clock, habits: Habits
    ) -> None:
        super().__init__(out, rng, blobs, texts, cwd=cwd, clock=clock, habits=habits)
        self.tokens = 0
        self._prompts: list[bytes] = []
        self._sealed = [base64.b64encode(rng.randbytes(size)) for size in (480, 900, 1500)]

    def start(self, session_id: bytes) -> None:
        """The `session_meta` line and the context Codex injects before the first prompt."""
        now = self.clock.iso()
        self._put(_META % (now, session_id, now, self.cwd, self.ids.hex(40)))
        now = self.clock.advance(5)
        self._put(_CONTEXT % (now, now, self.cwd))

    def _tokens(self) -> None:
        rng = self.rng
        last_in, last_out = rng.randrange(2_000, 60_000), rng.randrange(50, 3_000)
        self.tokens += last_in + last_out
        self._put(
            _TOKENS
            % (
                self.clock.advance(5),
                self.tokens,
                self.tokens * 3 // 4,
                self.tokens // 20,
                self.tokens // 40,
                self.tokens + self.tokens // 20,
                last_in,
                last_out,
                last_in + last_out,
                rng.randrange(1, 99),
                1_764_000_000 + rng.randrange(1_000_000),
            )
        )

    def turn(self, target: int, extra: str = "") -> None:
        """One prompt, one to three tool calls with their outputs, and the answer."""
        rng, clock, texts, habits = self.rng, self.clock, self.texts, self.habits
        if habits.compact_every and self.written >= self._next_compact:
            self.compact()
            self._next_compact = self.written + habits.compact_every
        self._put(_TURN_CONTEXT % (clock.advance(rng.randrange(20_000, 600_000)), self.cwd))
        prompt = texts.prompt(extra)
        self._prompts = [*self._prompts[-2:], prompt]
        now = clock.advance(3)
        self._put(_PROMPT % (now, prompt, now, prompt))
        for _ in range(rng.choice((1, 1, 2, 3))):
            thought = texts.thinking()
            now = clock.advance(rng.randrange(500, 6000))
            self._put(_REASONING % (now, thought, rng.choice(self._sealed), now, thought))
            call = self.ids.hex(24)
            self._put(_CALL % (clock.advance(10), texts.command(), self.cwd, call))
            blob = self._tool_output(target - self.written)
            self._put(
                _OUTPUT % (clock.advance(rng.randrange(100, 9000)), call, rng.randrange(9), rng.randrange(10), blob)
            )
            self._tokens()
        reply = texts.reply()
        now = clock.advance(rng.randrange(500, 9000))
        self._put(_REPLY % (now, reply, now, reply))
        self._tokens()
        self.turns += 1
        if self.turns > 2 and rng.random() < habits.rewind:
            self._put(_ROLLBACK % clock.advance(30_000))

    def compact(self) -> None:
        """A local compaction: the summary, and the kept prompts plus it as the new history."""
        summary = _SUMMARY_LEAD + self.texts.summary()
        history = b",".join([*(_KEPT % prompt for prompt in self._prompts), _KEPT % summary])
        now = self.clock.advance(4000)
        self._put(_COMPACTED % (now, summary, history, now))
