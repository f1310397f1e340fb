"""Tools the model may call: the tool record and the built-in read-only `fs-read` plugin."""
