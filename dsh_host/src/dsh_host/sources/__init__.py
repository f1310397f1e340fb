"""Session sources: the sessions of other agents, read in place and presented as dsh sessions.

A source is the read half of a store (`base.SessionSource`), registered through the
`dsh_register_session_sources` hook (`registry`). Its sessions carry ids `<source>:<the agent's
own id>`; the session query service answers from the store and every mounted source alike, and
the host refuses any write to a source's session. `synthesis` turns a source's projection of a
conversation into the dsh log, surface and texts its reads return.
"""
