"""The public surface of dsh_host, as the API tests check it: the top-level package and its
public sub-namespaces (docs/api.md documents each). Every other `dsh_host.<module>` is private."""

PUBLIC_NAMESPACES = (
    "dsh_host",
    "dsh_host.asyncs",
    "dsh_host.files",
    "dsh_host.hookspecs",
    "dsh_host.log",
    "dsh_host.models",
    "dsh_host.paging",
    "dsh_host.settings",
    "dsh_host.sources",
    "dsh_host.testing",
    "dsh_host.text",
    "dsh_host.ui",
)
