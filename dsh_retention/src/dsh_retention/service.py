"""The retention library as a host service."""

from __future__ import annotations

from .items import ItemRetainer
from .notice import describe_omitted, format_retention_notice
from .text import TextRetainer, retain_head_tail


class RetentionService:
    """What the `retention` plugin registers on a host: the retainers and their helpers.

    Plugins that prefer not to import `dsh_retention` reach the same API through
    `host.services.retention`.
    """

    TextRetainer = TextRetainer
    ItemRetainer = ItemRetainer
    retain_head_tail = staticmethod(retain_head_tail)
    describe_omitted = staticmethod(describe_omitted)
    format_retention_notice = staticmethod(format_retention_notice)
