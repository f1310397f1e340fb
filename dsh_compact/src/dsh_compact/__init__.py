"""Compaction for dsh. The checkpoint marker lives in `dsh_compact.marker`."""

from dsh_compact.marker import COMPACT_CHECKPOINT_SOURCE, is_compact_checkpoint_source

__all__ = ["COMPACT_CHECKPOINT_SOURCE", "is_compact_checkpoint_source"]
