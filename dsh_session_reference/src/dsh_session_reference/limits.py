"""The limits `[plugins.session-reference]` may set, and their defaults.

Apart from the service so that mounting the plugin can validate its table without loading the
service (which is built when first used).
"""

MAX_REFERENCES = 3
"""At most this many sessions per message (the configured limit may only be lower)."""
DEFAULT_CANDIDATE_LIMIT = 50
DEFAULT_MAX_REFERENCE_BYTES = 65536
MAX_SAFE_INTEGER = 2**53 - 1
