"""`dsh sessions list|search|show|export|import|check`.

This module is imported whenever the commands are registered, that is by every `dsh` run: what
only one subcommand needs (asyncio, the log reader, the checker) it imports itself.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

import click

from dsh_host.errors import ConfigError, DshError
from dsh_host.terminal_text import display_inline_text, display_text, inert_json
from dsh_host.text import iso_utc

if TYPE_CHECKING:
    from dsh_host.host import Host
    from dsh_host.jsontypes import JsonValue
    from dsh_host.session.check import Finding
    from dsh_host.session.events import SessionHeader
    from dsh_host.session.jsonl import ParsedLog
    from dsh_host.sources.base import SourceFileReport


class ImportFailed(DshError):
    """A log file that could not be imported (nothing of it was)."""


class LogViolations(DshError):
    """Stored logs that break a log invariant, or carry notes under `--strict` (each finding was printed)."""


@click.group()
def sessions() -> None:
    """List, inspect, export and import sessions."""


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_obj
def list_(host: Host, as_json: bool) -> None:
    """List sessions, newest first."""
    from dsh_host.query import record_json

    records = host.services.session_query.list_sessions_now()
    for record in records:
        if as_json:
            click.echo(inert_json(json.dumps(record_json(record), ensure_ascii=False)))
        else:
            cwd = display_inline_text(record.cwd) if record.cwd else "(no cwd)"
            title = shown_title(record.title, record.agent)
            click.echo(f"{display_inline_text(record.id)}  {iso_utc(record.created_at)}  {cwd}  {title}")


@sessions.command()
@click.argument("query")
@click.option(
    "--cwd", type=click.Path(file_okay=False), help="Rank this directory's sessions first (default: the current one)."
)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Print at most this many.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_obj
def search(host: Host, query: str, cwd: str | None, limit: int, as_json: bool) -> None:
    """Find sessions by id, title, cwd or what was said in them, best first.

    The query is plain words (no search syntax). A session that matched on what was said shows
    a snippet around the match on the line below it. No match exits 1 with one line on stderr,
    as grep does.
    """
    import asyncio

    target_cwd = str(Path.cwd()) if cwd is None else cwd
    rows = asyncio.run(
        host.services.session_query.search_candidates(query, target_id=None, target_cwd=target_cwd, limit=limit)
    )
    if not rows:
        click.echo(f"dsh: no session matches {json.dumps(query, ensure_ascii=False)}", err=True)
        raise click.exceptions.Exit(1)
    now = time.time() * 1000
    query_service = host.services.session_query
    for row in rows:
        agent = query_service.agent_name(row.id)
        if as_json:
            out: dict[str, object] = {
                "id": row.id,
                "title": row.title,
                "cwd": row.cwd,
                "createdAt": row.created_at,
                "lastActivityAt": row.last_activity_at,
                "snippet": row.snippet,
            }
            if agent is not None:
                out["agent"] = agent
            click.echo(inert_json(json.dumps(out, ensure_ascii=False)))
            continue
        title = shown_title(row.title, agent)
        where = display_inline_text(row.cwd) if row.cwd else "(no cwd)"
        click.echo(f"{display_inline_text(row.id)}  {age(row.created_at, now)}  {where}  {title}")
        if row.snippet is not None:
            click.echo(f"    {display_inline_text(row.snippet)}")


def shown_title(title: str | None, agent: str | None) -> str:
    """A session's title as a line shows it, after its agent's name for another agent's session."""
    shown = display_inline_text(title) if title else "(untitled)"
    return shown if agent is None else f"{display_inline_text(agent)} · {shown}"


def age(created_at: float, now: float) -> str:
    """How long ago a time (ms since the epoch) was, in its largest whole unit (`5m`, `3d`)."""
    seconds = max(0, (now - created_at) / 1000)
    for unit, size in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


@sessions.command()
@click.argument("session_id")
@click.option("--surface", is_flag=True, help="Show only the current surface (what the model sees).")
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
@click.pass_obj
def show(host: Host, session_id: str, surface: bool, as_json: bool) -> None:
    """Show a session's log (or its current surface): one event after another, its text whole.

    A message's text keeps its line breaks (other control characters are shown inert, as
    `\\xNN`), and a compaction checkpoint is marked as one; `--json` prints the events exactly.
    """
    import asyncio

    from dsh_host.store.base import SessionNotFound

    query = host.services.session_query
    try:
        if surface:
            snapshot = asyncio.run(query.read_surface(session_id))
            header, events = snapshot.header, snapshot.events
        else:
            header = asyncio.run(query.read_header(session_id))
            events = asyncio.run(query.read_events(session_id))
    except SessionNotFound as exc:
        raise DshError(str(exc)) from None
    if as_json:
        for event in events:
            click.echo(inert_json(json.dumps(event, ensure_ascii=False, separators=(",", ":"))))
        return
    cwd = display_inline_text(header.cwd) if header.cwd else "(no cwd)"
    agent = query.agent_name(header.id)
    kept = "" if agent is None else f"  agent {display_inline_text(agent)}"
    click.echo(f"session {display_inline_text(header.id)}{kept}  created {iso_utc(header.created_at)}  cwd {cwd}")
    for event in events:
        click.echo(show_event(event))


def show_event(event: dict) -> str:
    """An event in log form for a person to read: its seq, type and surface op, then its text whole.

    The text keeps its line breaks, each further line indented under the first; every other
    control character is made inert. A `user/message` from compaction is marked `checkpoint`.
    """
    head, summary = _head(event), _summary(event)
    if _is_checkpoint(event):
        head += " checkpoint"
    lead = display_inline_text(head) + "  "
    first, *rest = display_text(summary).split("\n")
    return "\n".join([lead + first, *(" " * len(lead) + line for line in rest)])


def _is_checkpoint(event: dict) -> bool:
    from dsh_host.store.search import CHECKPOINT_SOURCE_KIND, CHECKPOINT_SOURCE_PLUGIN

    data = event.get("data")
    source = data.get("source") if isinstance(data, dict) else None
    return (
        event.get("type") == "user/message"
        and isinstance(source, dict)
        and source.get("kind") == CHECKPOINT_SOURCE_KIND
        and source.get("plugin") == CHECKPOINT_SOURCE_PLUGIN
    )


def describe_event(event: dict) -> str:
    """One human line for an event in log form (untrusted text escaped, long text cut)."""
    summary = _summary(event)
    if len(summary) > 160:
        summary = summary[:157] + "..."
    # The type is untrusted too (any non-empty string is a valid custom type).
    return display_inline_text(f"{_head(event)}  {summary}")


def _head(event: dict) -> str:
    """An event's seq, type and surface op (raw: the caller makes it inert)."""
    op = event.get("surfaceOp")
    marker = "" if op is None else " +" if op == "append" else f" replace[{op.get('start')}..{op.get('end')}]"
    return f"{event.get('seq'):>6} {event.get('type')}{marker}"


def _summary(event: dict) -> str:
    """What an event says, raw: a message's text, a title, a tool call, a turn's fields."""
    data = event.get("data")
    kind = event.get("type")
    summary = ""
    if isinstance(data, dict):
        if "content" in data and isinstance(data["content"], list):
            content = data["content"]
            envelope = data.get("envelope")
            if isinstance(envelope, dict) and isinstance(envelope.get("displayContent"), list):
                content = envelope["displayContent"]
            summary = " ".join(
                b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") in ("text", "reasoning")
            )
        elif kind == "assistant/chunk":
            chunk = data.get("chunk", {})
            summary = chunk.get("text") or chunk.get("argumentsDelta") or chunk.get("type", "")
        elif kind in ("turn/start", "turn/end", "step/start", "step/end"):
            summary = json.dumps({k: v for k, v in data.items()}, ensure_ascii=False)
        elif kind == "session/title":
            summary = str(data.get("title", ""))
        elif kind == "tool/call":
            summary = f"{data.get('name')}({data.get('arguments')})"
    return summary if isinstance(summary, str) else str(summary)


@sessions.command()
@click.argument("session_id", required=False)
@click.option("--all", "every", is_flag=True, help="Every session you can read, one log after another, newest first.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not to stdout.")
@click.option("--html", "as_html", is_flag=True, help="Write the session as one static HTML page instead.")
@click.pass_obj
def export(host: Host, session_id: str | None, every: bool, output: Path | None, as_html: bool) -> None:
    """Write a session as JSONL (header line, then one event a line); `--all` writes every one.

    `dsh sessions import` reads what `--all` writes, so the pair moves sessions between stores.
    `--html` writes one session's conversation as a self-contained page that runs no script
    (the `web` plugin's, from the extra `dsh-host[web]`).
    """
    if every == (session_id is not None):
        raise ConfigError("dsh sessions export: name one SESSION_ID or give --all")
    if as_html:
        if session_id is None:
            raise ConfigError("dsh sessions export --html: name one SESSION_ID (--all writes JSONL only)")
        _export_html(host, session_id, output)
        return
    logs = _every_log(host) if every else [_one_log(host, cast(str, session_id))]
    if output is None:
        _write_logs(sys.stdout, logs)
        sys.stdout.flush()
    else:
        with open(output, "w", encoding="utf-8", newline="\n") as fh:
            _write_logs(fh, logs)


def _export_html(host: Host, session_id: str, output: Path | None) -> None:
    import asyncio

    from dsh_host.store.base import SessionNotFound

    pages = host.services.get("session_html")
    if pages is None:
        raise DshError("dsh sessions export --html needs the web plugin: pip install 'dsh-host[web]' and mount web")
    try:
        html = asyncio.run(pages.page(session_id))
    except SessionNotFound as exc:
        raise DshError(str(exc)) from None
    if output is None:
        sys.stdout.write(html)
        sys.stdout.flush()
    else:
        output.write_text(html, encoding="utf-8", newline="\n")


def _one_log(host: Host, session_id: str) -> tuple[SessionHeader, list[str]]:
    from dsh_host.store.base import SessionNotFound

    source = host.sources.for_session(session_id)
    try:
        return (host.store if source is None else source).read_lines(session_id)
    except SessionNotFound as exc:
        live = host.sessions.get(session_id)
        if live is None:
            raise DshError(str(exc)) from None
        return live.header, [e.to_line() for e in live.events]


def _every_log(host: Host) -> Iterator[tuple[SessionHeader, list[str]]]:
    for row in host.store.list_sessions():
        yield host.store.read_lines(row.id)


def _write_logs(out: TextIO, logs: Iterable[tuple[SessionHeader, list[str]]]) -> None:
    from dsh_host.session.jsonl import export_lines

    for header, lines in logs:
        out.writelines(export_lines(header, lines))


@sessions.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--replace", is_flag=True, help="Overwrite a session whose id already exists.")
@click.pass_obj
def import_(host: Host, files: tuple[Path, ...], replace: bool) -> None:
    """Import JSONL logs (`-` reads stdin), validating every line first (a bad file imports nothing).

    A file may hold several logs one after another, as `dsh sessions export --all` writes them.
    Each failure gets one error line; unless one file of one log was named, a last line counts
    the files not (wholly) imported. A log exported from a session source (another agent's
    session, read-only) becomes a dsh copy under a new id, its `parentSession` naming the original
    and its title the original's (else its first prompt's); `dsh sessions check` notes that it has
    no turns, and it cannot be resumed.
    """
    from dsh_host.session.jsonl import InvalidLog, read_logs
    from dsh_host.store.base import StoreError

    store = host.store  # a store that cannot be opened fails the command, before any file is read
    failures = 0
    for path in files:
        try:
            logs = (
                read_logs(sys.stdin.buffer.read, "<stdin>")
                if str(path) == "-"
                else read_logs(path.read_bytes, str(path))
            )
        except InvalidLog as exc:
            if len(files) == 1:
                raise ImportFailed(display_text(str(exc))) from None
            failures += 1
            click.echo(f"dsh: error: {display_text(str(exc))}", err=True)
            continue
        failed = False
        for parsed in logs:
            original = parsed.header.id
            parsed = _as_copy(host, parsed)
            try:
                store.import_log(parsed.header, parsed.events, replace=replace)
            except StoreError as exc:
                if len(files) == 1 and len(logs) == 1:
                    raise ImportFailed(display_text(str(exc))) from None
                failed = True
                click.echo(f"dsh: error: {display_text(str(exc))}", err=True)
                continue
            copied = "" if parsed.header.id == original else f"{display_inline_text(original)} as "
            click.echo(f"imported {copied}{display_inline_text(parsed.header.id)} ({len(parsed.events)} events)")
        failures += failed
    if failures:
        raise ImportFailed(f"{failures} of {len(files)} file(s) not imported")


def _as_copy(host: Host, parsed: ParsedLog) -> ParsedLog:
    """A source session's log as a dsh copy (a new id, the original as parent, its title); others unchanged.

    The title is the one the source gives the original (`{"kind": "copy"}`), else the fallback
    title of its first prompt, as dsh titles its own sessions; the event is appended last.
    """
    import dataclasses

    from dsh_host.live_sessions import new_session_id
    from dsh_host.session.events import Event
    from dsh_host.session.jsonl import ParsedLog
    from dsh_host.store.base import SessionNotFound
    from dsh_host.titles import fallback_title_data

    original = parsed.header.id
    source = host.sources.for_session(original)
    if source is None:
        return parsed
    header = dataclasses.replace(parsed.header, id=new_session_id(), parent_session=original, seed_length=None)
    events = list(parsed.events)
    try:
        stored = source.read_title(original)
    except SessionNotFound:  # the original is gone: its copy is still whole
        stored = None
    title: dict[str, JsonValue] | None = (
        {"title": stored.title, "messageSeqs": [], "source": {"kind": "copy", "session": original}}
        if stored is not None
        else fallback_title_data(events)
    )
    if title is not None and events:
        events.append(Event("session/title", len(events), events[-1].time, title))
    return ParsedLog(header, events)


@sessions.command("index")
@click.pass_obj
def index(host: Host) -> None:
    """Build the index of every session source that keeps one, or bring it up to date.

    Listing and search do the same when they need it; this does it on purpose (after a large
    import of another agent's sessions, say), with the same progress on a terminal. One line
    per source says what was read and how large the index is.
    """
    from dsh_host.progress import byte_size
    from dsh_host.sources import IndexedSource

    for name, source in host.sources.every():
        if not isinstance(source, IndexedSource):
            continue
        progress = source.build_index()
        if progress.building and not progress.complete:
            state = "another dsh is building it; this is what it has committed so far"
        else:
            state = "up to date" if progress.complete else "incomplete (interrupted)"
        read = f"{progress.files_done} of {progress.files_total} changed files read ({byte_size(progress.bytes_done)})"
        click.echo(f"{display_inline_text(name)}: {read}, index {byte_size(progress.index_bytes)}, {state}")


@sessions.command()
@click.argument("session_id", required=False)
@click.option("--source", "source_name", help="Report only this session source's files (lines it could not read).")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON lines.")
@click.option("--strict", is_flag=True, help="Fail on notes too, not only on violations.")
@click.pass_obj
def check(host: Host, session_id: str | None, source_name: str | None, as_json: bool, strict: bool) -> None:
    """Check stored logs against the log invariants (every session when none is named).

    Prints one line per finding: the session, the event's seq (`-` for the header), whether it
    is a violation or a note, the rule and what was found. A violation breaks a rule of the log
    format; a note is about a log that breaks none but, say, cannot be resumed. Exits 1 when
    there is a violation (or, with `--strict`, any finding). The mounted plugins add the rules
    of their own event types (`dsh_log_invariants`). Then, for each session source (or the one
    `--source` names, or the one serving SESSION_ID), one line per file with lines the source
    skipped (not JSON, cut short, too long): those are reported, not findings. Last, one line
    for the data dir and each entry in it that others may read (`private  PATH  mode ...`).
    """
    from dsh_host.session.check import Note, check_log
    from dsh_host.store.base import SessionNotFound

    if source_name is not None or (session_id is not None and host.sources.owner(session_id) is not None):
        files, reported = _report_sources(host, session_id, source_name, as_json)
        if not reported and not as_json:
            click.echo(f"{_count(files, 'source file')}: no problems")
        return
    invariants = [invariant for contributed in host.hook.dsh_log_invariants() for invariant in contributed]
    ids = [session_id] if session_id is not None else [row.id for row in host.store.list_sessions()]
    violations = notes = failed = 0
    for sid in ids:
        try:
            header, events = host.store.read_events(sid)
        except SessionNotFound as exc:
            raise DshError(str(exc)) from None
        found = check_log(header, events, invariants)
        session_notes = sum(isinstance(finding, Note) for finding in found)
        violations += len(found) - session_notes
        notes += session_notes
        failed += len(found) > (0 if strict else session_notes)
        for finding in found:
            click.echo(_finding_line(sid, finding, as_json))
    checked = _count(len(ids), "session")
    reported = violations + notes
    if session_id is None:
        files, source_lines = _report_sources(host, None, None, as_json)
        checked += f", {_count(files, 'source file')}{_index_size(host)}"
        reported += source_lines + _report_exposure(host, as_json)
    if violations or (strict and notes):
        counted = f"{violations} violation(s) and {notes} note(s)" if strict else f"{violations} violation(s)"
        raise LogViolations(f"{counted} in {failed} of {len(ids)} session(s)")
    if not reported and not as_json:
        click.echo(f"{checked}: no problems")


def _index_size(host: Host) -> str:
    """` (index 12.3 MB)`: the size on disk of the sources' indexes (each file counted once), or nothing."""
    from dsh_host.progress import byte_size
    from dsh_host.sources import IndexedSource

    sizes = {
        source.index_progress().index_bytes for _, source in host.sources.every() if isinstance(source, IndexedSource)
    }
    return f" (index {byte_size(max(sizes))})" if sizes else ""


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _report_sources(host: Host, session_id: str | None, source_name: str | None, as_json: bool) -> tuple[int, int]:
    """One line per source file with skipped lines (of one session, one source, or every source).

    Returns how many files were checked (a source session is one transcript file) and how many
    had lines to report.
    """
    if source_name is not None and source_name not in host.sources.names:
        known = ", ".join(host.sources.names) or "(none)"
        raise ConfigError(f"dsh sessions check: unknown source {source_name!r}; mounted sources: {known}")
    if session_id is not None:
        name = host.sources.owner(session_id)
        if name is None or (source_name is not None and name != source_name):
            raise DshError(f"session {json.dumps(session_id, ensure_ascii=False)} is not one of source {source_name!r}")
        reports = [(name, report) for report in host.sources.get(name).check(session_id)]
        files = 1
    else:
        names = host.sources.names if source_name is None else (source_name,)
        reports = [(name, report) for name in names for report in host.sources.get(name).check()]
        files = sum(len(host.sources.get(name).list_sessions()) for name in names)
    for name, report in reports:
        click.echo(_source_line(name, report, as_json))
    checked = {host.sources.owner(session_id)} if session_id is not None else set(names)
    problems = host.sources.problems(name for name in checked if name is not None)
    for name, line in problems:
        if as_json:
            click.echo(inert_json(json.dumps({"source": name, "problem": line}, ensure_ascii=False)))
        else:
            click.echo(f"{display_inline_text(name)}  {display_inline_text(line)}")
    return files, len(reports) + len(problems)


def _report_exposure(host: Host, as_json: bool) -> int:
    """One line per entry of the data dir (and the dir itself) that others may read or enter; how many."""
    from dsh_host.files import exposed_bits

    folder = host.data_dir
    try:
        entries = [folder, *sorted(folder.iterdir())]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    exposed = [(entry, exposed_bits(entry)) for entry in entries]
    exposed = [(entry, bits) for entry, bits in exposed if bits]
    for entry, bits in exposed:
        mode = f"0{entry.stat().st_mode & 0o777:o}"
        if as_json:
            record = {"private": False, "path": str(entry), "mode": mode}
            click.echo(inert_json(json.dumps(record, ensure_ascii=False)))
        else:
            whom = "other users" if bits & 0o007 else "the group"
            path = display_inline_text(str(entry))
            click.echo(f"private  {path}  mode {mode}: {whom} may read it (chmod go-rwx {path})")
    return len(exposed)


def _source_line(source: str, report: SourceFileReport, as_json: bool) -> str:
    if as_json:
        record = {
            "source": source,
            "path": report.path,
            "session": report.session_id,
            "skipped": report.skipped,
            "oversized": report.oversized,
        }
        return inert_json(json.dumps(record, ensure_ascii=False))
    over = f" ({report.oversized} too long to read)" if report.oversized else ""
    plural = "" if report.skipped == 1 else "s"
    return f"{source}  {display_inline_text(report.path)}  {report.skipped} skipped line{plural}{over}"


def _finding_line(session_id: str, finding: Finding, as_json: bool) -> str:
    from dsh_host.session.check import Note

    kind = "note" if isinstance(finding, Note) else "violation"
    if as_json:
        record = {
            "session": session_id,
            "seq": finding.seq,
            "kind": kind,
            "rule": finding.rule,
            "message": finding.message,
        }
        return inert_json(json.dumps(record, ensure_ascii=False))
    seq = "-" if finding.seq is None else str(finding.seq)
    return (
        f"{display_inline_text(session_id)}  seq {seq}  {kind}  {finding.rule}  {display_inline_text(finding.message)}"
    )
