"""Session sources for dsh: the sessions of other agents, read in place and never written.

Four plugins, mounted by name like any other: `claude-code` (Claude Code's transcripts),
`codex` (Codex CLI's rollouts), `gemini-cli` (Gemini CLI's chat recordings) and `opencode`
(OpenCode's database). Each registers a read-only `dsh_host.SessionSource` answering from an
index in dsh's data dir (`index`) that reads each byte of the agents' files once: a file that
grew is read only where it grew (`reading`), a build reads the rest in worker processes
(`build`, `workers`), and the projection of each format (`formats`) goes on where the last read
stopped. A store of many sessions (OpenCode's database) is read again only where its sessions
changed (`stores`).
"""
