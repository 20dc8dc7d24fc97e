"""``flowledger capability list|inspect|call|audit``: the capability catalog from the
command line, as the operator (the database's default session unless ``--session``).

Each command is the matching ``capability_*`` tool (`flowledger.deploy.registry.tools`)
of the session, with the operator's access: a listing that is due is refreshed (its
source started or contacted, the probe recorded in the registry), so ``list``,
``inspect`` and ``call`` open the database for writing; ``audit`` only reads (the
database must exist). On a terminal they print tables; with ``--json`` the tool's
result as one line of JSON. A refusal or failure is one ``error:`` line (with its code
in brackets) and exit code 1; so is a call whose tool answered with an error, after
printing the answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .runtime import (
    CONNECTION,
    CliError,
    DbOption,
    Options,
    emit_json,
    fail,
    parse_json_option,
    run_command,
    stdout_console,
)

__all__ = ["capability_app"]

capability_app = typer.Typer(
    help="The capability catalog: search, inspect and try the tools of registered sources.",
    no_args_is_help=True,
)

SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="UUID",
        help="Session to act as. \\[default: the database's default session]",
        show_default=False,
        rich_help_panel=CONNECTION,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the tool's result as JSON.")]
RefreshOption = Annotated[
    bool, typer.Option("--refresh", help="Probe the sources again instead of using the cache.")
]
SourceArgument = Annotated[str, typer.Argument(metavar="SOURCE", help="A registered source.")]
ToolArgument = Annotated[str, typer.Argument(metavar="TOOL", help="One of its tools.")]
_DESCRIPTION_COLUMN = 60


def _run(
    db: str | None,
    session: str | None,
    tool: str,
    arguments: dict[str, Any],
    render: Callable[[Console, dict[str, Any]], None],
    as_json: bool,
    *,
    writes: bool,
    failed: Callable[[dict[str, Any]], bool] = lambda _: False,
) -> None:
    options = Options(db, None, session)

    async def main() -> None:
        from ..deploy.registry.access import SourceAccess
        from ..deploy.registry.tools import CapabilityTools
        from ..host import open_session
        from ..tools import ToolError
        from ..tools.errors import PREFIX
        from ..workflows import Catalog

        async with open_session(
            options.url, Catalog(), options.session, activate=False, read_only=not writes
        ) as opened:
            tools = CapabilityTools.over(
                opened.store, opened.session_id, access=SourceAccess.OPERATOR, transport="cli"
            )
            call: Awaitable[dict[str, Any]] = tools.call(tool, arguments)
            try:
                result = await call
            except ToolError as exc:
                raise CliError(str(exc).removeprefix(PREFIX)) from None
        if as_json:
            emit_json(result)
        else:
            render(stdout_console(), result)
        if failed(result):
            raise typer.Exit(1)

    run_command(main)


@capability_app.command("list")
def list_(
    query: Annotated[
        str | None,
        typer.Argument(metavar="[QUERY]", help="Words to search for (none: list every tool)."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", metavar="NAME", help="Only this source's tools.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100, help="Results per page.")] = 20,
    cursor: Annotated[
        str | None, typer.Option("--cursor", metavar="C", help="The next page of a listing.")
    ] = None,
    refresh: RefreshOption = False,
    json_output: JsonOption = False,
    db: DbOption = None,
    session: SessionOption = None,
) -> None:
    """Search the registered sources' tools (ranked), or list them all."""
    arguments: dict[str, Any] = {"limit": limit}
    for key, value in (("query", query), ("source", source), ("cursor", cursor)):
        if value is not None:
            arguments[key] = value
    if refresh:
        arguments["refresh"] = True
    _run(db, session, "capability_list", arguments, _render_list, json_output, writes=True)


@capability_app.command("inspect")
def inspect(
    source: SourceArgument,
    tool: ToolArgument,
    refresh: RefreshOption = False,
    json_output: JsonOption = False,
    db: DbOption = None,
    session: SessionOption = None,
) -> None:
    """One tool: schemas, hints, fingerprints, whether it may be tried, an example."""
    arguments: dict[str, Any] = {"source": source, "tool": tool}
    if refresh:
        arguments["refresh"] = True
    _run(db, session, "capability_inspect", arguments, _render_inspect, json_output, writes=True)


@capability_app.command("call")
def call(
    source: SourceArgument,
    tool: ToolArgument,
    arguments: Annotated[
        str,
        typer.Option(
            "--arguments",
            "-a",
            metavar="JSON",
            help="The arguments: a JSON object (@FILE reads a file, - reads stdin).",
        ),
    ] = "{}",
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=0.1, max=120, metavar="S", help="Seconds for the call."),
    ] = None,
    json_output: JsonOption = False,
    db: DbOption = None,
    session: SessionOption = None,
) -> None:
    """Try a read-only tool (or one on the source's call_tools); audited."""
    try:
        document = parse_json_option("--arguments", arguments)
    except CliError as exc:
        fail(str(exc))
    if not isinstance(document, dict):
        raise typer.BadParameter("expected a JSON object", param_hint="--arguments")
    request: dict[str, Any] = {"source": source, "tool": tool, "arguments": document}
    if timeout is not None:
        request["timeout"] = timeout
    _run(
        db,
        session,
        "capability_call",
        request,
        _render_call,
        json_output,
        writes=True,
        failed=lambda result: bool(result["is_error"]),
    )


@capability_app.command("audit")
def audit(
    limit: Annotated[int, typer.Option("--limit", min=1, max=100, help="Entries per page.")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", metavar="C", help="The next page.")
    ] = None,
    json_output: JsonOption = False,
    db: DbOption = None,
    session: SessionOption = None,
) -> None:
    """The session's capability_call audit log, oldest first."""
    arguments: dict[str, Any] = {"limit": limit}
    if cursor is not None:
        arguments["cursor"] = cursor
    _run(db, session, "capability_audit", arguments, _render_audit, json_output, writes=False)


# -- rendering --------------------------------------------------------------------------


def _yes(value: Any) -> str:
    return "yes" if value else "no"


def _clipped(text: str | None, limit: int = _DESCRIPTION_COLUMN) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _render_sources(console: Console, sources: list[dict[str, Any]]) -> None:
    for item in sources:
        if item["status"] in ("fresh", "refreshed"):
            continue
        why = f": {item['error']}" if item["error"] else ""
        console.print(
            Text.assemble(("source ", "dim"), item["source"], f" {item['status']}{why}"),
            style="yellow",
            soft_wrap=True,
        )


def _render_list(console: Console, result: dict[str, Any]) -> None:
    ranked = result["query"] is not None
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("source", "tool", "read-only", "callable", *(["score"] if ranked else [])):
        table.add_column(column, no_wrap=True)
    table.add_column("description")
    for item in result["results"]:
        score = [f"{item['score']:.2f}"] if ranked else []
        table.add_row(
            item["source"],
            item["tool"],
            _yes(item["read_only"]),
            _yes(item["callable"]),
            *score,
            _clipped(item["description"]),
        )
    if result["results"]:
        console.print(table)
    shown = len(result["results"])
    what = "matching tools" if ranked else "tools"
    summary = f"{shown} of {result['total']} {what}" if shown else f"no {what}"
    if result["next_cursor"]:
        summary += f"; next page: --cursor {result['next_cursor']}"
    console.print(summary, style="dim", soft_wrap=True)
    _render_sources(console, result["sources"])
    if "note" in result:
        console.print(result["note"], style="dim", soft_wrap=True)


def _render_inspect(console: Console, result: dict[str, Any]) -> None:
    from ..deploy.sources.fingerprint import short

    tool = result["tool"]
    listing = result["listing"]
    console.print(
        Text.assemble(
            ("tool ", "dim"),
            (f"{result['source']}.{tool['name']}", "bold"),
            ("  revision ", "dim"),
            str(result["revision"]),
            ("  listing ", "dim"),
            f"{listing['status']} (probed {listing['probed_at']})",
        ),
        soft_wrap=True,
    )
    if tool["title"]:
        console.print(tool["title"], soft_wrap=True)
    if tool["description"]:
        console.print(tool["description"], soft_wrap=True, markup=False)
    console.print(
        f"read-only {_yes(tool['read_only'])}  idempotent {_yes(tool['idempotent'])}  "
        f"contract {short(tool['contract_fingerprint'])}  full {short(tool['full_fingerprint'])}",
        soft_wrap=True,
    )
    console.print(
        f"callable: {_yes(result['callable'])} ({result['callable_because']})", soft_wrap=True
    )
    for title, schema in (
        ("input schema", tool["input_schema"]),
        ("output schema", tool["output_schema"]),
    ):
        if schema is not None:
            console.print(f"{title}:", style="bold")
            console.print(json.dumps(schema, indent=2), markup=False, soft_wrap=True)
    example = result["example"]
    valid = {True: "valid", False: "does not validate", None: "not checked"}[example["valid"]]
    console.print(f"example arguments ({valid}):", style="bold")
    console.print(json.dumps(example["arguments"]), markup=False, soft_wrap=True)


def _render_call(console: Console, result: dict[str, Any]) -> None:
    style = "red" if result["is_error"] else "green"
    console.print(
        Text.assemble(
            (result["outcome"], style),
            f"  {result['source']}.{result['tool']}  revision {result['revision']}  "
            f"{result['duration_ms']:.0f} ms",
            ("  (truncated)", "yellow") if result["truncated"] else "",
        ),
        soft_wrap=True,
    )
    texts = [block.get("text", "") for block in result["content"] if block.get("type") == "text"]
    others = [block.get("type", "?") for block in result["content"] if block.get("type") != "text"]
    for text in texts:
        console.print(text, markup=False, soft_wrap=True)
    if result["structured_content"] is not None and not texts:
        console.print(json.dumps(result["structured_content"], indent=2), markup=False)
    if others:
        console.print(f"other content: {', '.join(others)} (--json shows it)", style="dim")


def _render_audit(console: Console, result: dict[str, Any]) -> None:
    entries = result["entries"]
    if not entries:
        console.print("no capability calls recorded", style="dim")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("seq", "at", "via", "source", "rev", "tool", "outcome", "code", "ms"):
        table.add_column(column, no_wrap=True)
    for entry in entries:
        duration = entry["duration_ms"]
        table.add_row(
            str(entry["seq"]),
            entry["at"],
            entry["transport"],
            entry["source"],
            "" if entry["revision"] is None else str(entry["revision"]),
            entry["tool"],
            entry["outcome"],
            entry["code"] or "",
            "" if duration is None else f"{duration:.0f}",
        )
    console.print(table)
    if result["next_cursor"]:
        console.print(f"next page: --cursor {result['next_cursor']}", style="dim")
