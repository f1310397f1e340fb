"""Session persistence: the embedded SQLite store."""
