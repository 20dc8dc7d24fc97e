"""Rich rendering of the ``flowledger source`` results (their ``--json`` documents):
a probe's tool table, the registry's list, one source, a save and a migration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .render import format_time, status_text

__all__ = [
    "render_migration",
    "render_probe",
    "render_saved",
    "render_source",
    "render_sources",
    "tools_table",
]

# The order a document is shown in (its canonical JSON is sorted by key).
_FIELDS = (
    "format",
    "name",
    "description",
    "stdio",
    "http",
    "python",
    "builtin",
    "openapi",
    "secrets",
    "sessions",
    "allow_tools",
    "call_tools",
)


_TRANSPORT_FIELDS = {
    "stdio": ("command", "args", "env", "cwd"),
    "http": ("url", "headers"),
    "python": ("module", "functions", "read_only", "idempotent"),
    "openapi": ("document", "base_url", "operations", "auth"),
}


def _short(fingerprint: object) -> str:
    from ..deploy.sources.fingerprint import short

    return short(str(fingerprint))


def tools_table(tools: Sequence[Mapping[str, Any]]) -> Table:
    """Tool, the server's read-only and idempotent hints, and the first 12 hex digits
    of the contract and full fingerprints."""
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("tool", "read-only", "idempotent", "contract", "full"):
        table.add_column(column, no_wrap=True)
    for tool in tools:
        table.add_row(
            str(tool["name"]),
            "yes" if tool.get("read_only") else "no",
            "yes" if tool.get("idempotent") else "no",
            _short(tool["contract_fingerprint"]),
            _short(tool["full_fingerprint"]),
        )
    return table


def _server_name(server: Mapping[str, Any] | None) -> str:
    if not server:
        return "(unnamed)"
    return " ".join(str(part) for part in (server.get("name"), server.get("version")) if part) or (
        "(unnamed)"
    )


def render_probe(
    console: Console,
    server: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]],
    label: str,
    note: str = "",
) -> None:
    """What ``source probe`` prints on a terminal."""
    console.print(
        Text.assemble(
            ("server ", "dim"),
            (_server_name(server), "bold"),
            ("  protocol ", "dim"),
            str(server.get("protocol_version", "")),
            ("  source ", "dim"),
            label,
        ),
        soft_wrap=True,
    )
    console.print(tools_table(tools))
    count = f"{len(tools)} tool" + ("" if len(tools) == 1 else "s")
    console.print(
        f"{count}; fingerprints: the first 12 hex digits of sha256 (--json shows them whole)"
        + (f"; {note}" if note else ""),
        style="dim",
    )


def _visibility(document: Mapping[str, Any]) -> str:
    sessions = document.get("sessions")
    if sessions is None:
        return "all"
    return f"{len(sessions)} session" + ("" if len(sessions) == 1 else "s")


def _probe_cell(probe: Mapping[str, Any] | None, revision: object) -> Text:
    if probe is None:
        return Text("never", style="dim")
    when = format_time(probe.get("probed_at"), seconds=False)
    cell = Text.assemble(f"{when} ", ("ok", "green") if probe.get("ok") else ("error", "bold red"))
    if probe.get("revision") != revision:
        cell.append(f" (of revision {probe.get('revision')})", style="dim")
    return cell


def render_sources(console: Console, result: Mapping[str, Any]) -> None:
    """``source list``: one row per registered source."""
    sources: Sequence[Mapping[str, Any]] = result.get("sources", [])
    if not sources:
        console.print("No registered sources (add one with `flowledger source add`).", style="dim")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in ("name", "revision", "enabled", "visibility", "last probe", "tools"):
        table.add_column(column, no_wrap=column != "name")
    for item in sources:
        probe = item.get("last_probe")
        tools = "-" if probe is None or not probe.get("ok") else str(probe.get("tool_count"))
        table.add_row(
            Text(str(item["name"]), style="bold"),
            str(item["revision"]),
            Text("yes", style="green") if item["enabled"] else Text("no", style="yellow"),
            "all" if item["visibility"] == "all" else f"{len(item['visibility'])} session(s)",
            _probe_cell(probe, item["revision"]),
            tools,
        )
    console.print(table)


def _ordered(document: Mapping[str, Any], fields: Sequence[str] = _FIELDS) -> dict[str, Any]:
    shown = {key: document[key] for key in fields if key in document}
    shown.update({key: value for key, value in document.items() if key not in shown})
    for key, order in _TRANSPORT_FIELDS.items():
        if isinstance(shown.get(key), Mapping):
            shown[key] = _ordered(shown[key], order)
    return shown


def render_saved(console: Console, result: Mapping[str, Any]) -> None:
    """``source add|set``: what was saved (or that nothing changed)."""
    name = str(result["name"])
    if result.get("unchanged"):
        line = Text.assemble(
            ("source ", "dim"), (name, "bold"), f" unchanged (revision {result['revision']})"
        )
    else:
        verb = "registered" if result.get("added") else "saved"
        line = Text.assemble(
            (f"{verb} source ", "green"),
            (name, "bold"),
            f" revision {result['revision']}",
            (f"  sha256:{result['digest']}", "dim"),
        )
    console.print(line, soft_wrap=True)
    if not result.get("enabled", True):
        console.print(
            f"it is disabled: enable it with `flowledger source enable {name}`", style="yellow"
        )


def render_source(console: Console, result: Mapping[str, Any]) -> None:
    """``source show``: the document, its state, revisions, last probe and pinned runs."""
    name = str(result["name"])
    document: Mapping[str, Any] = result["document"]
    console.print(
        Text.assemble(
            ("source ", "dim"),
            (name, "bold"),
            f"  revision {result['revision']} of {result['latest']}  ",
            Text("enabled", style="green")
            if result["enabled"]
            else Text("disabled", style="yellow"),
            ("  visible to ", "dim"),
            "every session" if _visibility(document) == "all" else _visibility(document),
        ),
        soft_wrap=True,
    )
    import yaml  # only `source show` prints YAML: the other commands start without it

    text = yaml.safe_dump(
        _ordered(document), sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    console.print(Text(text.rstrip("\n")), soft_wrap=True)
    console.print(Text("revisions", style="bold"))
    revisions = Table(box=None, show_header=False, show_edge=False, pad_edge=False)
    for _ in range(3):
        revisions.add_column(no_wrap=True)
    for item in result.get("revisions", []):
        revisions.add_row(
            f"  {item['revision']}", format_time(item["saved_at"]), f"sha256:{item['digest'][:12]}"
        )
    console.print(revisions)
    probe: Mapping[str, Any] | None = result.get("last_probe")
    if probe is not None and probe.get("revision") != result["latest"]:
        console.print(
            f"the last probe is of revision {probe.get('revision')}, not the current one: "
            f"probe it again with `flowledger source probe {name}`",
            style="yellow",
            soft_wrap=True,
        )
    if probe is None:
        console.print(
            Text.assemble(
                ("last probe ", "bold"),
                ("never (probe it: flowledger source probe ", "dim"),
                (name, "dim"),
                (")", "dim"),
            )
        )
    elif probe.get("ok"):
        tools = probe.get("tools", [])
        console.print(
            Text.assemble(
                ("last probe ", "bold"),
                f"{format_time(probe['probed_at'])} of revision {probe['revision']}: ",
                ("ok", "green"),
                f", server {_server_name(probe.get('server'))}, {len(tools)} tool",
                "" if len(tools) == 1 else "s",
            ),
            soft_wrap=True,
        )
        console.print(tools_table(tools))
    else:
        console.print(
            Text.assemble(
                ("last probe ", "bold"),
                f"{format_time(probe['probed_at'])} of revision {probe['revision']}: ",
                ("error", "bold red"),
                f" {probe.get('error') or ''}",
            ),
            soft_wrap=True,
        )
    runs: Sequence[Mapping[str, Any]] = result.get("runs", [])
    if not runs:
        console.print(Text.assemble(("pinned runs ", "bold"), ("none", "dim")))
        return
    console.print(Text("pinned runs", style="bold"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in ("session", "run", "status", "revision"):
        table.add_column(column, no_wrap=True)
    for run in runs:
        table.add_row(
            str(run["session_id"]),
            str(run["run_id"]),
            status_text(str(run["status"])),
            "" if run.get("revision") is None else str(run["revision"]),
        )
    console.print(table)


def render_migration(console: Console, report: Mapping[str, Any]) -> None:
    """``source migrate``: the sources registered and the deployments rebound."""
    dry = bool(report.get("dry_run"))
    sources: Sequence[Mapping[str, Any]] = report.get("sources", [])
    deployments: Sequence[Mapping[str, Any]] = report.get("deployments", [])
    if not deployments:
        console.print(
            f"nothing to migrate: no live deployment of the {report.get('sessions', 0)} "
            "session(s) looked at binds a source inline"
        )
        return
    verbs = (
        {"added": "would register", "changed": "would widen", "unchanged": "would reuse"}
        if dry
        else {"added": "registered", "changed": "widened", "unchanged": "reused"}
    )
    for source in sources:
        revision = source.get("revision")
        line = Text.assemble(
            (f"{verbs[str(source['action'])]} source ", "green" if not dry else "dim"),
            (str(source["name"]), "bold"),
            "" if revision is None else f" revision {revision}",
            (f"  visible to {len(source['sessions'])} session(s)", "dim"),
            (
                "; used by "
                + ", ".join(
                    sorted({f"{u['deployment']}.{u['dependency']}" for u in source["uses"]})
                ),
                "dim",
            ),
        )
        console.print(line, soft_wrap=True)
        if not source.get("enabled", True):
            console.print(
                f"  source {source['name']} is disabled: runs of the deployments bound to it "
                f"are unrunnable until `flowledger source enable {source['name']}`",
                style="yellow",
            )
    for item in deployments:
        bindings = ", ".join(f"{dep} -> {name}" for dep, name in item["bindings"].items())
        where = f"deployment {item['name']} (session {item['session_id']})"
        if item.get("skipped"):
            console.print(
                Text.assemble(("skipped ", "yellow"), f"{where}: {item['skipped']}"),
                soft_wrap=True,
            )
            continue
        target = (
            "a new revision"
            if item.get("to_revision") is None
            else f"revision {item['to_revision']}"
        )
        console.print(
            Text.assemble(
                ("would rebind " if dry else "rebound ", "dim" if dry else "green"),
                where,
                f": revision {item['from_revision']} -> {target}: {bindings}",
            ),
            soft_wrap=True,
        )
        unfinished: Sequence[str] = item.get("unfinished_runs", [])
        if unfinished:
            shown = ", ".join(unfinished[:5]) + (" ..." if len(unfinished) > 5 else "")
            console.print(
                f"  {len(unfinished)} unfinished run(s) keep the inline sources they were "
                f"pinned to (a pin never changes): {shown}",
                style="dim",
                soft_wrap=True,
            )
    if dry:
        console.print("dry run: nothing was written", style="dim")
