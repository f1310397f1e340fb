"""Model adapters: the adapter protocol, the registry, and the two built-in adapters."""
