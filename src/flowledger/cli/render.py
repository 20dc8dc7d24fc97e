"""Rich rendering of tool results: tables, colours, and what a paused run is waiting for.

Everything here takes the JSON the tools return (workflows-spec §7) and a console; rich
drops colours and live displays by itself when the output is not a terminal.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .loops import entries_loop

__all__ = [
    "KIND_ICONS",
    "STATUS_STYLES",
    "Pause",
    "example_payload",
    "failures",
    "format_time",
    "render_definitions",
    "render_history",
    "render_pause",
    "render_run",
    "render_runs",
    "resume_command",
    "status_text",
]

STATUS_STYLES: Final[Mapping[str, str]] = {
    "pending": "dim",
    "running": "cyan",
    "interrupted": "bold yellow",
    "completed": "bold green",
    "cancelled": "magenta",
    "failed": "bold red",
}

KIND_ICONS: Final[Mapping[str, tuple[str, str]]] = {
    "run_started": ("▶", "cyan"),
    "vertex_completed": ("✓", "green"),
    "run_interrupted": ("⏸", "yellow"),
    "run_resumed": ("↻", "cyan"),
    "run_completed": ("✔", "bold green"),
    "run_cancelled": ("■", "magenta"),
    "run_failed": ("✗", "bold red"),
}


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def format_time(text: object, *, date: bool = True, seconds: bool = True) -> str:
    """A tool timestamp in local time: ``2025-01-31 14:02:03`` (``2025-01-31 14:02``
    without ``seconds``) or, without ``date``, ``14:02:03.153``."""
    moment = _parse_time(text)
    if moment is None:
        return str(text) if text is not None else ""
    local = moment.astimezone()
    if date:
        return local.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
    return local.strftime("%H:%M:%S.") + f"{local.microsecond // 1000:03d}"


def _progress(entry: Mapping[str, Any]) -> str:
    total = entry.get("total_vertices", 0)
    if not total:
        return ""
    return f"{entry.get('completed_vertices', 0)}/{total}"


# -- definitions ------------------------------------------------------------------------


def _input_fields(schema: object) -> str:
    if not isinstance(schema, Mapping):
        return ""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    return ", ".join(f"{name}*" if name in needed else str(name) for name in properties)


def render_definitions(console: Console, result: Mapping[str, Any]) -> None:
    definitions: Sequence[Mapping[str, Any]] = result.get("definitions", [])
    if not definitions:
        console.print("No workflow definitions.", style="dim")
        return
    table = Table(
        box=box.SIMPLE_HEAD, show_edge=False, title="Workflow definitions", title_justify="left"
    )
    table.add_column("name", style="bold")
    table.add_column("version")
    table.add_column("input (* required)")
    table.add_column("resume")
    table.add_column("description", ratio=1)
    for item in definitions:
        table.add_row(
            str(item.get("name", "")),
            str(item.get("version", "")),
            _input_fields(item.get("input_schema")),
            Text("yes", style="green") if item.get("resume_supported") else Text("no", "dim"),
            str(item.get("description", "")),
        )
    console.print(table)
    if result.get("truncated"):
        console.print("(more definitions exist than one listing shows)", style="dim")


# -- runs -------------------------------------------------------------------------------


RUNS_FIXED_WIDTH: Final = 38 + 13 + 17  # run id, status and time columns with padding


def render_runs(console: Console, result: Mapping[str, Any], flags: Sequence[str]) -> None:
    runs: Sequence[Mapping[str, Any]] = result.get("runs", [])
    if not runs:
        console.print("No runs yet. Try [bold]flowledger demo[/].")
        return
    ordered = sorted(runs, key=lambda run: str(run.get("created_at", "")), reverse=True)
    definitions = [
        f"{run.get('definition_name', '')} {run.get('definition_version', '')}" for run in ordered
    ]
    # Run ids, statuses and times are never cut; on a narrow terminal the summary goes
    # first, then the definition.
    room = console.width - RUNS_FIXED_WIDTH
    show_definition = room >= max(map(len, definitions)) + 2
    show_summary = show_definition and room - max(map(len, definitions)) - 2 >= 14
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("run", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if show_definition:
        table.add_column("definition", no_wrap=True)
    if show_summary:
        table.add_column("summary", overflow="ellipsis", no_wrap=True, ratio=1)
    table.add_column("updated", no_wrap=True)
    for run, definition in zip(ordered, definitions, strict=True):
        cells: list[Any] = [str(run.get("run_id", "")), listed_status(run)]
        if show_definition:
            cells.append(definition)
        if show_summary:
            cells.append(str(run.get("status_summary", "")))
        cells.append(format_time(run.get("updated_at"), seconds=False))
        table.add_row(*cells)
    console.print(table)
    following = result.get("next")
    if following:
        command = shlex.join(["flowledger", "runs", "list", "--after", str(following), *flags])
        console.print(Text.assemble(("more runs: ", "dim"), command), soft_wrap=True)


def listed_status(run: Mapping[str, Any]) -> Text:
    """A run's status in a list; a queued run's with its place (``queued 2 in
    definition/x``: second in line for a slot of that scope)."""
    text = status_text(str(run.get("run_status", "")))
    queued = run.get("queued")
    if isinstance(queued, Mapping):
        text.append(f" queued {queued.get('position', '')} in {queued.get('scope', '')}")
    return text


def render_run(console: Console, run: Mapping[str, Any], pause: Pause | None) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    grid.add_row("run", Text(str(run.get("run_id", "")), style="bold"))
    grid.add_row(
        "definition", f"{run.get('definition_name', '')} {run.get('definition_version', '')}"
    )
    grid.add_row("status", status_text(str(run.get("run_status", ""))))
    if run.get("status_summary"):
        grid.add_row("summary", str(run["status_summary"]))
    if run.get("cancel_reason"):  # the words its canceller gave
        grid.add_row("cancel reason", Text(str(run["cancel_reason"])))  # not Rich markup
    readiness = run.get("resume_readiness")
    if isinstance(readiness, Mapping) and readiness.get("status") in ("ready", "blocked"):
        ready = readiness["status"] == "ready"
        grid.add_row(
            "resume",
            Text("ready", "green") if ready else Text("blocked (see below)", "bold red"),
        )
    for where, error in failures(run):
        text = f"{error.get('type', '')}: {error.get('message', '')}"
        grid.add_row("error", Text(f"{where}: {text}" if where else text, "red"))
    grid.add_row("checkpoint", f"revision {run.get('checkpoint_revision', 0)}")
    grid.add_row("activity cursor", str(run.get("activity_cursor", 0)))
    owner = run.get("owner")
    if isinstance(owner, Mapping):  # pending and running runs: who executes it
        grid.add_row("owner", _owner_text(owner))
    queued = run.get("queued")
    if isinstance(queued, Mapping):  # waiting for a slot of a max_running limit
        grid.add_row(
            "queued", f"position {queued.get('position', '')} for {queued.get('scope', '')}"
        )
    if run.get("parent_run_id"):
        grid.add_row("parent", str(run["parent_run_id"]))
    scheduled = run.get("scheduled_by")
    if isinstance(scheduled, Mapping):  # started by a schedule (`flowledger schedule`)
        how = "triggered at" if scheduled.get("manual") else "slot"
        grid.add_row(
            "scheduled by",
            f"{scheduled.get('schedule_id', '')} ({how} {scheduled.get('slot', '')})",
        )
    for artifact in run.get("artifacts", []) or []:
        grid.add_row("artifact", f"{artifact.get('kind', '')} {artifact.get('id', '')}")
    grid.add_row("created", format_time(run.get("created_at")))
    grid.add_row("updated", format_time(run.get("updated_at")))
    console.print(grid)
    if pause is not None:
        console.print()
        render_pause(console, pause)


def _owner_text(owner: Mapping[str, Any]) -> Text:
    if owner.get("live"):
        return Text(f"live (lease epoch {owner.get('lease_epoch', '?')})")
    return Text(f"none since {format_time(owner.get('since'))}", style="yellow")


# -- history ----------------------------------------------------------------------------


def history_table(
    entries: Sequence[Mapping[str, Any]], *, title: str | None = None, loops: bool = False
) -> Table:
    """The entries as a table; for a graph with a ``loops`` (or entries that show one) the
    progress column is left out: completed vertices out of the total say nothing there."""
    loops = loops or entries_loop(entries)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, title=title, title_justify="left")
    table.add_column("rev", justify="right")
    table.add_column("kind", no_wrap=True)
    table.add_column("vertex")
    if not loops:
        table.add_column("progress", justify="right")
    table.add_column("time", no_wrap=True)
    for entry in entries:
        kind = str(entry.get("kind", ""))
        icon, style = KIND_ICONS.get(kind, ("·", ""))
        vertex = Text(str(entry.get("vertex_label", "")))
        vertex_id = entry.get("vertex_id")
        if vertex_id and vertex_id != entry.get("vertex_label"):
            vertex.append(f" ({vertex_id})", style="dim")
        progress = [] if loops else [_progress(entry)]
        table.add_row(
            str(entry.get("revision", "")),
            Text.assemble((icon + " ", style), (kind, style)),
            vertex,
            *progress,
            format_time(entry.get("occurred_at"), date=False),
        )
    return table


def render_history(
    console: Console, result: Mapping[str, Any], flags: Sequence[str], *, loops: bool = False
) -> None:
    entries: Sequence[Mapping[str, Any]] = result.get("entries", [])
    if not entries:
        console.print("No activity recorded (yet) for this run.", style="dim")
    else:
        console.print(history_table(entries, loops=loops))
    if result.get("cancel_reason"):  # the words its canceller gave, as text, not markup
        console.print(Text.assemble(("cancel reason: ", "dim"), str(result["cancel_reason"])))
    if "next_revision" in result or "next_event_id" in result:
        command = ["flowledger", "history", str(result.get("run_id", ""))]
        if "next_revision" in result:
            command += ["--after-revision", str(result["next_revision"])]
        if result.get("next_event_id"):
            command += ["--after-event-id", str(result["next_event_id"])]
        console.print(
            Text.assemble(("more: ", "dim"), shlex.join([*command, *flags])), soft_wrap=True
        )


# -- pauses -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pause:
    """What a paused run waits for (from ``workflow_run_get``'s ``pending``), and whether
    it can be resumed now (its ``resume_readiness``)."""

    run_id: str
    kind: str  # "request" (resume with a payload), "error" (resume retries, no payload)
    # or "timer" (parked: its owner resumes it at wake_at)
    vertex: str
    label: str
    info: Any
    error_type: str
    error_message: str
    resume_schema: Mapping[str, Any] | None
    blocked: str = ""  # why a resume would be refused now, or ""
    flags: Sequence[str] = ()
    wake_at: str = ""  # a timer's wake time, or a request's deadline (RFC 3339), or ""

    @property
    def errored(self) -> bool:
        return self.kind == "error"

    @property
    def parked(self) -> bool:
        return self.kind == "timer"

    @property
    def where(self) -> str:
        return self.label or self.vertex or "routing"

    @classmethod
    def from_run(cls, run: Mapping[str, Any], flags: Sequence[str] = ()) -> Pause | None:
        """The pause a ``workflow_run_get`` result describes, or None if it shows none."""
        pending = run.get("pending")
        if not isinstance(pending, Mapping):
            return None
        found = pending.get("error")
        error: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        readiness = run.get("resume_readiness")
        blocked = ""
        if isinstance(readiness, Mapping) and readiness.get("status") == "blocked":
            errors = [
                item
                for item in readiness.get("diagnostics", [])
                if isinstance(item, Mapping) and item.get("severity") == "error"
            ]
            # This process not knowing the definition is no reason to call the run blocked:
            # the command to resume it just needs the app that registers it.
            if any(item.get("code") != "definition_missing" for item in errors):
                blocked = "; ".join(
                    f"{item.get('message', '')}"
                    + (f" ({item['hint']})" if item.get("hint") else "")
                    for item in errors
                )
            elif "--app" not in flags:
                flags = (*flags, "--app", "MODULE:CATALOG")
        schema = pending.get("resume_schema")
        return cls(
            run_id=str(run.get("run_id", "")),
            kind=str(pending.get("kind", "")),
            vertex=str(pending.get("vertex_id", "")),
            label=str(pending.get("vertex_label", "")),
            info=pending.get("info"),
            error_type=str(error.get("type", "")),
            error_message=str(error.get("message", "")),
            resume_schema=schema if isinstance(schema, Mapping) else None,
            blocked=blocked,
            flags=tuple(flags),
            wake_at=str(pending.get("wake_at") or ""),
        )


_EXAMPLES: Final[Mapping[str, Any]] = {
    "boolean": True,
    "string": "...",
    "integer": 0,
    "number": 0,
    "object": {},
    "array": [],
    "null": None,
}


def example_payload(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A resume payload shaped like ``schema``: its required properties with sample values."""
    if not schema:
        return {}
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return {}
    out: dict[str, Any] = {}
    for name in required:
        spec = properties.get(name)
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if isinstance(spec, Mapping) and isinstance(spec.get("enum"), list) and spec["enum"]:
            out[str(name)] = spec["enum"][0]
        else:
            out[str(name)] = _EXAMPLES.get(str(kind), "...")
    return out


def resume_command(pause: Pause, payload: Mapping[str, Any] | None = None) -> str:
    command = ["flowledger", "resume", pause.run_id]
    if not pause.errored:
        body = dict(payload) if payload is not None else example_payload(pause.resume_schema)
        command += ["--payload", json.dumps(body)]
    return shlex.join([*command, *pause.flags])


def render_pause(
    console: Console,
    pause: Pause,
    *,
    payload: Mapping[str, Any] | None = None,
    hint: bool = True,
    indent: int = 0,
) -> None:
    body: list[Any] = []
    info = pause.info
    details: list[tuple[str, Any]] = []
    if pause.parked:
        body.append(Text.assemble(("parked until ", "bold"), pause.wake_at))
        body.append(Text("Its session's owner resumes it then; cancel it to stop it.", style="dim"))
    elif pause.errored:
        body.append(Text.assemble((f"{pause.error_type}: ", "bold red"), pause.error_message))
        body.append(Text("Resuming retries the step; it takes no payload.", style="dim"))
    elif isinstance(info, Mapping) and isinstance(info.get("question"), str):
        body.append(Text(info["question"], style="bold"))
        details = [(str(k), v) for k, v in info.items() if k != "question"]
    elif info is not None:
        body.append(Text(json.dumps(info, ensure_ascii=False), style="bold"))
    if details:
        line = Text()
        for index, (key, value) in enumerate(details):
            if index:
                line.append("  ·  ", style="dim")
            line.append(key.replace("_", " ") + ": ", style="dim")
            line.append(value if isinstance(value, str) else json.dumps(value))
        body.append(line)
    if not body:
        body.append(Text("The run is waiting for input."))
    if pause.wake_at and not pause.parked:
        body.append(
            Text.assemble(
                ("deadline ", "dim"), pause.wake_at, (": then it continues by itself", "dim")
            )
        )
    if pause.parked:
        title = f"[cyan]⏲ parked at {pause.where}[/]"
    elif pause.errored:
        title = f"[red]✖ failed at {pause.where}, paused[/]"
    else:
        title = f"[yellow]⏸ waiting at {pause.where}[/]"
    panel = Panel(
        Group(*body),
        title=title,
        title_align="left",
        border_style="red" if pause.errored else "cyan" if pause.parked else "yellow",
        expand=False,
    )
    console.print(Padding(panel, (0, 0, 0, indent), expand=False))
    if not hint or pause.parked:
        return
    if pause.blocked:
        console.print(
            Text.assemble(("resume is blocked: ", "bold red"), pause.blocked), soft_wrap=True
        )
        return
    label = "retry with: " if pause.errored else "resume with: "
    console.print(Text.assemble((label, "dim"), resume_command(pause, payload)), soft_wrap=True)


def failures(run: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """A failed run's errors, each with the vertex it failed at (its label, else its id):
    every one of ``errors`` when several vertices failed (parallel branches in one step),
    else ``error`` alone, unnamed."""
    errors = run.get("errors")
    if isinstance(errors, list) and len(errors) > 1:
        return [
            (str(item.get("vertex_label") or item.get("vertex_id") or ""), item["error"])
            for item in errors
            if isinstance(item, Mapping) and isinstance(item.get("error"), Mapping)
        ]
    error = run.get("error")
    return [("", error)] if isinstance(error, Mapping) else []
