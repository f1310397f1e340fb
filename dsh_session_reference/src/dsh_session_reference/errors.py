"""The one exception type of session references (a `DshError`), its stable codes, and error-chain rendering."""

from __future__ import annotations

from typing import Final

from dsh_host import DshError


class ErrorCode:
    """The stable, exhaustive set of error codes (plain ``str`` values, usable as JSON)."""

    INVALID_CONFIG: Final = "SESSION_REFERENCE_INVALID_CONFIG"
    INVALID_REFERENCE: Final = "SESSION_REFERENCE_INVALID_REFERENCE"
    SELF_REFERENCE: Final = "SESSION_REFERENCE_SELF_REFERENCE"
    TOO_MANY: Final = "SESSION_REFERENCE_TOO_MANY"
    READ_FAILED: Final = "SESSION_REFERENCE_READ_FAILED"
    BUDGET_EXCEEDED: Final = "SESSION_REFERENCE_BUDGET_EXCEEDED"
    CANCELLED: Final = "SESSION_REFERENCE_CANCELLED"


ERROR_CODES: Final = frozenset(value for name, value in vars(ErrorCode).items() if not name.startswith("_"))


class SessionReferenceError(DshError):
    """A session-reference failure with a stable ``code``.

    ``cause`` is kept as given (the reference allows a non-exception value there, such as a
    plain rejection reason); when it is an exception it is also chained as ``__cause__`` so
    tracebacks show it.
    """

    def __init__(self, code: str, message: str, cause: object = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown session-reference error code {code!r}")
        super().__init__(message, code=code)
        self.message = message
        self.cause = cause
        if isinstance(cause, BaseException):
            self.__cause__ = cause

    def __repr__(self) -> str:
        return f"SessionReferenceError({self.code!r}, {self.message!r})"


def render_error_chain(error: object) -> str:
    """Render ``error`` and its causes as one line: ``message: cause: cause-of-cause``.

    An exception renders as its message (its type name when the message is empty); any other
    value as ``str(value)``. A cause whose rendering equals the enclosing message is left out,
    so a wrapper that repeats its cause's text does not print it twice. The chain stops before
    an exception it has already rendered, so a cyclic chain terminates.
    """
    messages = _messages(error)
    line = messages[-1]
    for message in reversed(messages[:-1]):
        line = message if line == message else f"{message}: {line}"
    return line


def render_error_line(error: object) -> str:
    """``error`` and its causes as the one line a command or a protocol client reads: each cause once.

    The chain of ``render_error_chain``, less every cause the line already holds as a clause:
    a wrapper that quotes its cause (``failed to read referenced session: <cause>``, as the
    reference words it) names the cause once, where the chain, which the terminal UI's notice
    keeps as the reference prescribes, repeats it.
    """
    line = ""
    for message in _messages(error):
        if not line:
            line = message
        elif not _holds_clause(line, message):
            line = f"{line}: {message}"
    return line


def _messages(error: object) -> list[str]:
    """The rendered messages of ``error`` and its causes, outermost first (a cycle ends the list)."""
    messages: list[str] = []
    seen: set[int] = set()
    current: object = error
    while current is not None:
        if not isinstance(current, BaseException):
            messages.append(str(current))
            break
        if id(current) in seen:
            break
        seen.add(id(current))
        messages.append(str(current) or type(current).__name__)
        current = _cause_of(current)
    return messages


def _holds_clause(line: str, clause: str) -> bool:
    """Whether ``clause`` is one of the ``: ``-separated clauses of ``line`` (or a run of them)."""
    return f": {line}: ".find(f": {clause}: ") != -1


def _cause_of(error: BaseException) -> object:
    if isinstance(error, SessionReferenceError):
        return error.cause
    return error.__cause__
