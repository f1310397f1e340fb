"""The agents' session formats: where each agent keeps its files and how their records are projected.

`claude_code` (Claude Code's transcripts) and `codex` (Codex CLI's rollouts) each implement
`dsh_sources.transcript.TranscriptFormat`. The plugins (`dsh_sources.claude_code`,
`dsh_sources.codex`) load them only when a source is first used.
"""
