"""The agent: inbox, loop, placement, tickets and request reconstruction (private modules).

`agent.Agent` is the entry point; the public names are exported from `dsh_host` (the agent
and its results) and `dsh_host.log` (`rebuild_request`, `request_json`). Nothing is imported
here, so loading one module of the agent does not load the rest.
"""
