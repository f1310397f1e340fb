"""The `dsh` command: one module per command group."""
