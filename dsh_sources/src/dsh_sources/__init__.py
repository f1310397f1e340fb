"""Session sources for dsh: the sessions of other agents, read in place and never written.

Two plugins, mounted by name like any other: `claude-code` (Claude Code's transcripts) and
`codex` (Codex CLI's rollouts). Each registers a read-only `dsh_host.SessionSource`; a
freshness index in dsh's data dir (`index`) keeps listing and search from re-reading files
that did not change.
"""
