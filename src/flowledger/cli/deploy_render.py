"""Rich rendering of the ``flowledger deploy`` results (`DeployService`'s JSON), the
counterpart of ``render.py`` for deployments and deployed runs; ``--json`` skips it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .render import example_payload, failures, format_time, status_text

__all__ = [
    "render_artifact",
    "render_artifact_saved",
    "render_artifacts",
    "render_check",
    "render_deleted",
    "render_deployed_run",
    "render_deployment",
    "render_deployments",
    "render_next",
    "render_trace",
]

_SEVERITY: Final[Mapping[str, str]] = {"error": "bold red", "warning": "yellow"}
_CELL: Final = 60


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


def _binding(spec: Any) -> Text:
    """A deployment's binding of one dependency, whole: the command line (or URL, or
    registered source) first, then each other field as JSON, one per line. A long line
    wraps; nothing is cut (the command is what an operator checks)."""
    if not isinstance(spec, Mapping):
        return Text(json.dumps(spec, ensure_ascii=False))
    lines: list[str] = []
    stdio, http = spec.get("stdio"), spec.get("http")
    if isinstance(stdio, Mapping):
        command = [str(stdio.get("command", "")), *(str(a) for a in stdio.get("args") or [])]
        lines.append("stdio " + shlex.join(command))
        lines += [
            f"  {key}: {json.dumps(value, ensure_ascii=False)}"
            for key, value in stdio.items()
            if key not in ("command", "args")
        ]
    elif isinstance(http, Mapping):
        lines.append(f"http {http.get('url', '')}")
        lines += [
            f"  {key}: {json.dumps(value, ensure_ascii=False)}"
            for key, value in http.items()
            if key != "url"
        ]
    lines += [
        f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for key, value in spec.items()
        if key not in ("stdio", "http")
    ]
    return Text("\n".join(lines), overflow="fold")


def _command(*argv: str, flags: Sequence[str]) -> str:
    return shlex.join(["flowledger", *argv, *flags])


def diagnostics_table(diagnostics: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("severity")
    table.add_column("code", style="bold")
    table.add_column("message", ratio=1)
    for item in diagnostics:
        severity = str(item.get("severity", ""))
        message = Text(str(item.get("message", "")))
        if item.get("hint"):
            message.append(f"\nhint: {item['hint']}", style="dim")
        table.add_row(
            Text(severity, style=_SEVERITY.get(severity, "")), str(item.get("code", "")), message
        )
    return table


def render_artifact_saved(console: Console, result: Mapping[str, Any]) -> None:
    console.print(
        Text.assemble(
            ("saved artifact ", "green"),
            (f"{result.get('name')}@{result.get('version')}", "bold"),
            (f" sha256:{result.get('digest')}", "dim"),
        ),
        soft_wrap=True,
    )


def render_artifacts(console: Console, result: Mapping[str, Any]) -> None:
    artifacts: Sequence[Mapping[str, Any]] = result.get("artifacts", [])
    if not artifacts:
        console.print("No artifacts.", style="dim")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, title="Artifacts", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("version")
    table.add_column("digest", style="dim")
    table.add_column("saved")
    for item in artifacts:
        for version in item.get("versions", []):
            table.add_row(
                str(item.get("name", "")),
                str(version.get("version", "")),
                f"sha256:{str(version.get('digest', ''))[:12]}",
                format_time(version.get("saved_at")),
            )
    console.print(table)


def render_artifact(console: Console, result: Mapping[str, Any]) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    grid.add_row("artifact", Text(f"{result.get('name')}@{result.get('version')}", style="bold"))
    grid.add_row("digest", f"sha256:{result.get('digest')}")
    grid.add_row("closure", f"sha256:{result.get('closure_digest')}")
    children = result.get("children") or []
    if children:
        grid.add_row("children", ", ".join(f"{c.get('name')}@{c.get('version')}" for c in children))
    grid.add_row("saved", format_time(result.get("saved_at")))
    console.print(grid)
    console.print(json.dumps(result.get("document"), indent=2, ensure_ascii=False), soft_wrap=True)


def render_check(console: Console, result: Mapping[str, Any]) -> None:
    runnable = result.get("status") == "runnable"
    console.print(
        Text.assemble(
            (f"{result.get('deployment')}", "bold"),
            (f" revision {result.get('revision')}: ", "dim"),
            ("runnable", "green") if runnable else ("unrunnable", "bold red"),
        ),
        soft_wrap=True,
    )
    diagnostics = result.get("diagnostics") or []
    if diagnostics:
        console.print(diagnostics_table(diagnostics))


def render_deployments(console: Console, result: Mapping[str, Any]) -> None:
    deployments: Sequence[Mapping[str, Any]] = result.get("deployments", [])
    if not deployments:
        console.print("No deployments.", style="dim")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, title="Deployments", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("live revision", justify="right")
    table.add_column("revisions", justify="right")
    for item in deployments:
        live = item.get("live")
        table.add_row(
            str(item.get("name", "")),
            Text(str(live), style="green") if live is not None else Text("none", style="dim"),
            str(item.get("revisions", "")),
        )
    console.print(table)


def render_next(console: Console, result: Mapping[str, Any], command: Sequence[str]) -> None:
    """The line that says how to read the next page, when there is one."""
    after = result.get("next")
    if isinstance(after, str):
        console.print(
            Text.assemble(
                ("more: ", "dim"), (shlex.join(["flowledger", *command, "--cursor", after]), "")
            ),
            soft_wrap=True,
        )


def render_deleted(console: Console, result: Mapping[str, Any]) -> None:
    """``deploy delete`` / ``artifact delete``: what was deleted."""
    name = str(result.get("name", ""))
    if "version" in result:
        what = f"artifact {name}@{result['version']}"
    else:
        numbers = ", ".join(str(n) for n in result.get("revisions", []))
        what = f"deployment {name} (revisions {numbers})"
    console.print(Text.assemble(("deleted ", "green"), (what, "bold")), soft_wrap=True)


def render_deployment(console: Console, revision: Mapping[str, Any], *, verb: str = "") -> None:
    """One revision (``deployment_show``, ``save``, ``rollback``); ``verb`` leads the line."""
    artifact = revision.get("artifact") or {}
    head = Text()
    if verb:
        head.append(f"{verb} ", style="green")
    head.append(f"{revision.get('name')} revision {revision.get('revision')}", style="bold")
    head.append(" (live)" if revision.get("live") else " (not live)", style="dim")
    console.print(head, soft_wrap=True)
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("artifact", f"{artifact.get('name')}@{artifact.get('version')}")
    table.add_row("drift", str(revision.get("drift", "")))
    table.add_row("saved", format_time(revision.get("saved_at")))
    table.add_row("digest", f"sha256:{revision.get('digest')}")
    document = revision.get("document")
    sources = document.get("sources") if isinstance(document, Mapping) else None
    if isinstance(sources, Mapping):
        for name, spec in sources.items():
            table.add_row(f"source {name}", _binding(spec))
    console.print(table)


def render_deployed_run(
    console: Console, result: Mapping[str, Any], flags: Sequence[str] = ()
) -> None:
    """A ``run_deployment``, ``resume_run`` or ``inspect_run`` result."""
    status = str(result.get("status", ""))
    if status == "unrunnable":
        console.print(Text("unrunnable: nothing was started", style="bold red"))
        console.print(diagnostics_table(result.get("diagnostics", [])))
        return
    run_id = str(result.get("run_id", ""))
    deployment = result.get("deployment") or {}
    line = Text.assemble(
        ("run ", "dim"),
        (run_id, "bold"),
        "  ",
        status_text(status),
        ("  deployment ", "dim"),
        f"{deployment.get('name')} revision {deployment.get('revision')}",
    )
    if result.get("resumed") is False:
        line.append("  (not resumed)", style="bold red")
    console.print(line, soft_wrap=True)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    readiness = result.get("resume_readiness") or {}
    ready = str(readiness.get("status", ""))
    if status == "interrupted" or ready == "blocked":
        label = Text(ready, style="green" if ready == "ready" else "bold red")
        if readiness.get("revalidated") is False:
            label.append(" (sources not revalidated)", style="dim")
        grid.add_row("resume", label)
    grid.add_row("checkpoint", str(result.get("latest_checkpoint", "")))
    if result.get("trace_count") is not None:
        count = result["trace_count"]
        grid.add_row("trace", f"{count} entr{'y' if count == 1 else 'ies'}")
    interrupt = result.get("interrupt")
    if isinstance(interrupt, Mapping):
        where = interrupt.get("vertex_label") or interrupt.get("vertex_id") or ""
        grid.add_row("waiting at", str(where))
        info = interrupt.get("info")
        if isinstance(info, Mapping) and isinstance(info.get("question"), str):
            grid.add_row("question", Text(info["question"], style="bold"))
            for key, value in info.items():
                if key != "question":
                    grid.add_row(f"  {key}", _short(value))
        elif info is not None:
            grid.add_row("info", _short(info))
    for where, error in failures(result):
        text = f"{error.get('type', '')}: {error.get('message', '')}"
        grid.add_row("error", Text(f"{where}: {text}" if where else text, style="red"))
    if "outcome" in result:
        grid.add_row("outcome", str(result.get("outcome")))
    if "output" in result:
        grid.add_row("output", _short(result.get("output")))
    console.print(grid)
    diagnostics = readiness.get("diagnostics") or []
    if diagnostics:
        console.print(diagnostics_table(diagnostics))
    if status == "interrupted" and ready == "ready" and isinstance(interrupt, Mapping):
        schema = interrupt.get("resume_schema")
        payload = example_payload(schema if isinstance(schema, Mapping) else None)
        console.print(
            Text.assemble(
                ("resume with: ", "dim"),
                _command("deploy", "resume", run_id, "--payload", json.dumps(payload), flags=flags),
            ),
            soft_wrap=True,
        )
    elif ready == "blocked":
        console.print(
            Text.assemble(
                ("once fixed, check with: ", "dim"), _command("inspect", run_id, flags=flags)
            ),
            soft_wrap=True,
        )


def render_trace(console: Console, result: Mapping[str, Any], flags: Sequence[str] = ()) -> None:
    entries: Sequence[Mapping[str, Any]] = result.get("entries", [])
    total = int(result.get("total", 0))
    start = int(result.get("start", 0))
    if not entries:
        console.print(f"No trace entries from {start} (the trace has {total}).", style="dim")
        return
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title=f"Trace: {len(entries)} of {total} entries, from --start {start}",
        title_justify="left",
    )
    table.add_column("#", justify="right", style="dim")
    table.add_column("time")
    table.add_column("node", style="bold")
    table.add_column("kind")
    table.add_column("status")
    table.add_column("tool")
    table.add_column("result", ratio=1)
    for entry in entries:
        error = entry.get("error")
        if isinstance(error, Mapping):
            detail = Text(f"{error.get('type')}: {error.get('message')}", style="red")
        else:
            detail = Text(_short(entry.get("result", "")))
        status = str(entry.get("status", ""))
        table.add_row(
            str(entry.get("seq", "")),
            format_time(entry.get("started_at"), date=False),
            str(entry.get("node", "")),
            str(entry.get("kind", "")),
            Text(status, style="red" if error else ""),
            f"{entry.get('dependency')}.{entry.get('tool')}" if entry.get("tool") else "",
            detail,
        )
    console.print(table)
    following = start + len(entries)
    if following < total:
        run_id = str(result.get("run_id", ""))
        console.print(
            Text.assemble(
                ("more: ", "dim"),
                _command("trace", run_id, "--start", str(following), flags=flags),
            ),
            soft_wrap=True,
        )
