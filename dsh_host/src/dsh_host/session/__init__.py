"""The session log: events, lossless JSON, surface folding, crash repair, interchange."""
