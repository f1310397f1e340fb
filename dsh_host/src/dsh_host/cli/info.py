"""`dsh plugins` and `dsh config`: what is installed, what is mounted, what is configured."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from dsh_host.terminal_text import display_inline_text

if TYPE_CHECKING:
    from dsh_host.host import Host
    from dsh_host.jsontypes import JsonValue


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def plugins(host: Host, as_json: bool) -> None:
    """List installed plugins and the mounted ones, with the hooks each implements."""
    mounted = {p.name: p for p in host.mounted}
    rows: list[dict[str, JsonValue]] = []
    for name in sorted(host.installed):
        info = host.installed[name]
        record = mounted.get(name)
        rows.append(
            {
                "name": name,
                "distribution": info.distribution,
                "version": info.version,
                "module": info.module,
                "mounted": record is not None,
                "hooks": list(record.hooks) if record else [],
            }
        )
    if as_json:
        out = {"installed": rows, "mounted": [p.name for p in host.mounted]}
        click.echo(json.dumps(out, indent=2))
        return
    for row in rows:
        state = "mounted" if row["mounted"] else "installed"
        click.echo(f"{row['name']:<20} {row['distribution'] or '?'} {row['version'] or '?'}  [{state}]")
        if row["hooks"]:
            click.echo(f"{'':<20} hooks: {', '.join(row['hooks'])}")
    order = ", ".join(p.name for p in host.mounted) or "(none)"
    click.echo(f"mount order: {order}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def config(host: Host, as_json: bool) -> None:
    """Show the effective configuration and where each part came from."""
    cfg = host.config
    problems = [f"sources.{name}: {line}" for name, line in host.sources.problems()]
    data = {
        "file": str(cfg.path) if cfg.path else None,
        "data_dir": str(host.data_dir),
        "config": cfg.data,
        "origins": dict(cfg.origins),
        "mounted": [p.name for p in host.mounted],
        "problems": problems,
    }
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    click.echo(f"# file: {data['file'] or '(none: built-in defaults)'}")
    click.echo(f"# data dir: {data['data_dir']}")
    for section, table in cfg.data.items():
        for key, value in table.items():
            origin = cfg.origins.get(f"{section}.{key}", cfg.origins.get(section, "defaults"))
            click.echo(f"{section}.{key} = {json.dumps(value, default=str)}    # {origin}")
    if "plugins" not in cfg.host:
        names = ", ".join(p.name for p in host.mounted) or "(none)"
        click.echo(f"host.plugins = (installed defaults: {names})    # defaults")
    for problem in problems:
        click.echo(f"# note: {display_inline_text(problem)}")
