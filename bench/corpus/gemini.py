"""Gemini CLI sessions (JSON lines, as v0.44 and later write them), written line by line from byte templates.

A metadata line, then the start-up context turn (`<session_context>`) set as the history
(`$set.messages`); per turn the prompt, a reply holding tool calls (appended again under its id
when the calls complete, with their results), the tool responses as a user message of
`functionResponse` parts (where most bytes are), and the answer (appended again when its token
counts arrive), each message followed by `$set.lastUpdated`. Now and then a compression sets a
new history (context, `<state_snapshot>` summary, acknowledgement, the last turn under new ids),
or a `$rewindTo` drops the last prompt and what followed it.
"""

from __future__ import annotations

from bench.corpus.material import SessionWriter

MODEL = b"gemini-2.5-pro"
_META = b'{"sessionId":"%s","projectHash":"%s","startTime":"%s","lastUpdated":"%s","kind":"main"}\n'
_SET_TIME = b'{"$set":{"lastUpdated":"%s"}}\n'
_SET_HISTORY = b'{"$set":{"messages":[%s],"lastUpdated":"%s"}}\n'
_CONTEXT = (
    b'{"id":"%s","timestamp":"%s","type":"user","content":[{"text":"<session_context>\\nThis is the Gemini CLI. '
    b"We are setting up the context for our chat.\\nMy operating system is: linux\\n"
    b"I'm currently working in the directory: %s\\n</session_context>\"}]}"
)
_USER = b'{"id":"%s","timestamp":"%s","type":"user","content":[{"text":"%s"}]}'
_CALL = (
    b'{"id":"%s","timestamp":"%s","type":"gemini","content":"","toolCalls":[{"id":"%s","name":"run_shell_command",'
    b'"args":{"command":"%s"},"status":"%s","timestamp":"%s","displayName":"Shell","description":"Runs a shell '
    b'command","renderOutputAsMarkdown":false%s}],"thoughts":[{"subject":"Planning","description":"%s",'
    b'"timestamp":"%s"}],"model":"' + MODEL + b'"}'
)
_RESULT = b',"result":[{"functionResponse":{"id":"%s","name":"run_shell_command","response":{"output":"%s"}}}]'
_RESPONSE = (
    b'{"id":"%s","timestamp":"%s","type":"user","content":[{"functionResponse":{"id":"%s",'
    b'"name":"run_shell_command","response":{"output":"%s"}}}]}'
)
_REPLY = (
    b'{"id":"%s","timestamp":"%s","type":"gemini","content":"%s","thoughts":[],"tokens":%s,"model":"' + MODEL + b'"}'
)
_TOKENS = b'{"input":%d,"output":%d,"cached":%d,"thoughts":0,"tool":0,"total":%d}'
_GEMINI = b'{"id":"%s","timestamp":"%s","type":"gemini","content":[{"text":"%s"}]}'
_ACK = b"Got it. Thanks for the additional context!"
_SNAPSHOT = b"<state_snapshot>\\n<overall_goal>%s</overall_goal>\\n</state_snapshot>"
_REWIND = b'{"$rewindTo":"%s"}\n'


class GeminiWriter(SessionWriter):
    """Writes one Gemini CLI session to `out`, counting the bytes written."""

    _last: tuple[bytes, bytes] | None = None
    """The last turn's prompt and answer (None: none to carry into a compression)."""

    def _message(self, record: bytes) -> None:
        """A message record, and the `$set` of `lastUpdated` Gemini appends after each."""
        self._put(record + b"\n")
        self._put(_SET_TIME % self.clock.iso())

    def _history(self, records: list[bytes]) -> None:
        """The records appended one by one, then set as the whole history (`$set.messages`)."""
        for record in records:
            self._message(record)
        self._put(_SET_HISTORY % (b",".join(records), self.clock.iso()))

    def start(self, session_id: bytes, project_hash: bytes) -> None:
        """The metadata line and the start-up context turn."""
        now = self.clock.iso()
        self._put(_META % (session_id, project_hash, now, now))
        self._history([_CONTEXT % (self.ids.uuid(), self.clock.advance(5), self.cwd)])

    def turn(self, target: int, extra: str = "") -> None:
        """One prompt, one to three tool calls with their responses, and the answer."""
        rng, clock, texts, habits = self.rng, self.clock, self.texts, self.habits
        if habits.compact_every and self.written >= self._next_compact and self._last is not None:
            self.compress()
            self._next_compact = self.written + habits.compact_every
        prompt_id, prompt = self.ids.uuid(), texts.prompt(extra)
        self._message(_USER % (prompt_id, clock.advance(rng.randrange(20_000, 600_000)), prompt))
        for _ in range(rng.choice((1, 1, 2, 3))):
            message, call, now = self.ids.uuid(), self.ids.hex(16), clock.advance(rng.randrange(500, 6000))
            command, thought = texts.command(), texts.thinking()
            self._message(_CALL % (message, now, call, command, b"executing", now, b"", thought, now))
            blob = self._tool_output((target - self.written) // 2)
            done = clock.advance(rng.randrange(100, 9000))
            self._message(_CALL % (message, now, call, command, b"success", done, _RESULT % (call, blob), thought, now))
            self._message(_RESPONSE % (self.ids.uuid(), clock.advance(5), call, blob))
        answer_id, answer, now = self.ids.uuid(), texts.reply(), clock.advance(rng.randrange(500, 9000))
        self._message(_REPLY % (answer_id, now, answer, b"null"))
        used_in, used_out = rng.randrange(2_000, 60_000), rng.randrange(50, 3_000)
        tokens = _TOKENS % (used_in, used_out, used_in * 3 // 4, used_in + used_out)
        self._message(_REPLY % (answer_id, now, answer, tokens))
        self._last = (prompt, answer)
        self.turns += 1
        if self.turns > 2 and rng.random() < habits.rewind:
            self._put(_REWIND % prompt_id)  # /rewind to before this turn's prompt
            self._last = None

    def compress(self) -> None:
        """A compression: context, summary, acknowledgement and the last turn, under new ids, as the history."""
        assert self._last is not None
        prompt, answer = self._last
        clock, ids = self.clock, self.ids
        self._history(
            [
                _CONTEXT % (ids.uuid(), clock.advance(4000), self.cwd),
                _USER % (ids.uuid(), clock.advance(1), _SNAPSHOT % self.texts.summary()),
                _GEMINI % (ids.uuid(), clock.advance(1), _ACK),
                _USER % (ids.uuid(), clock.advance(1), prompt),
                _GEMINI % (ids.uuid(), clock.advance(1), answer),
            ]
        )
