"""The agents' session formats: where each agent keeps its files and how their records are projected.

`claude_code` (Claude Code's transcripts), `codex` (Codex CLI's rollouts) and `gemini_cli`
(Gemini CLI's chat recordings) each implement `dsh_sources.transcript.TranscriptFormat`;
`opencode` (OpenCode's database, read by `opencode_db`, and its older JSON folder, read by
`opencode_storage`, both shown as `opencode_projection` says) implements
`dsh_sources.transcript.StoreFormat`. The plugins
(`dsh_sources.claude_code`, `dsh_sources.codex`, `dsh_sources.gemini_cli`, `dsh_sources.opencode`)
load them only when a source is first used.
"""
