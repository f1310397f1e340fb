"""The agent: inbox, loop, placement and request reconstruction."""
