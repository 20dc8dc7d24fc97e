"""``flowledger draft``: the session's draft artifacts from the command line, as the
operator (`DraftService` over the session's `DeployService`, the database's default
session unless ``--session``).

``create``, ``patch``, ``add-tool``, ``connect``, ``set-output``, ``publish`` and
``delete`` write; ``list``, ``show`` and ``validate`` open the database read-only (it
must exist; nothing is written). An edit applies at ``--revision N`` (compare-and-swap:
a stale one is refused with ``[revision_conflict]`` and nothing applied); without it, at
the revision the command reads first, which is what a person at a terminal means. An
edit may leave the draft invalid: it is kept, and its diagnostics are printed (each with
its place, code, hint and next actions; ``flowledger explain CODE`` says more).

On a terminal the commands print summaries and tables; with ``--json`` the service's
answer as one line of JSON (the same as the matching ``draft_*`` MCP tool's). A refusal
is one ``error: [code] ...`` line on stderr and exit code 1; ``validate`` exits 1 when
the draft is not deployable (invalid, or a dependency not bound to a registered source
whose last probe lists its tools).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .deploy import Cursor, Db, Json, Limit, Query, Session, run_service
from .deploy_render import render_next
from .runtime import CliError, parse_json_option

__all__ = ["draft_app"]

draft_app = typer.Typer(
    help="Draft artifacts: create, edit step by step (kept even when invalid, with "
    "diagnostics), validate against the registered sources, publish.",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Argument(metavar="DRAFT", help="The draft's name.")]
Revision = Annotated[
    int | None,
    typer.Option(
        "--revision",
        metavar="N",
        help="Apply only at revision N (compare-and-swap). \\[default: the current one]",
        show_default=False,
    ),
]
Bind = Annotated[
    list[str] | None,
    typer.Option(
        "--bind",
        metavar="DEPENDENCY=SOURCE",
        help="Bind a dependency to a registered source (repeatable).",
    ),
]
_CELL = 70


def _drafts(service: Any) -> Any:
    from ..deploy.drafts.service import DraftService

    return DraftService(service)


def _run(
    db: str | None,
    session: str | None,
    work: Callable[[Any], Awaitable[dict[str, Any]]],
    render: Callable[[Console, dict[str, Any], list[str]], None],
    as_json: bool,
    *,
    writes: bool,
    refused: Callable[[dict[str, Any]], bool] = lambda _: False,
) -> None:
    async def with_drafts(service: Any) -> dict[str, Any]:
        return await work(_drafts(service))

    run_service(db, session, with_drafts, render, as_json, writes=writes, refused=refused)


async def _at(drafts: Any, name: str, revision: int | None) -> int:
    """``revision``, or the draft's current one."""
    if revision is not None:
        return revision
    current: int = (await drafts.get(name))["revision"]
    return current


def _bindings(values: Sequence[str] | None) -> dict[str, str] | None:
    if not values:
        return None
    found: dict[str, str] = {}
    for value in values:
        dependency, sep, source = value.partition("=")
        if not sep or not dependency or not source:
            raise CliError(f"--bind takes DEPENDENCY=SOURCE, not {value!r}")
        found[dependency] = source
    return found


def _json(option: str, text: str | None) -> Any:
    return None if text is None else parse_json_option(option, text)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


def _diagnostics(console: Console, diagnostics: Sequence[Mapping[str, Any]], title: str) -> None:
    if not diagnostics:
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, title=title, title_justify="left")
    table.add_column("place", style="bold")
    table.add_column("code", style="red")
    table.add_column("message / hint / next", overflow="fold")
    for item in diagnostics:
        cell = Text(str(item.get("message", "")))
        if item.get("hint"):
            cell.append(f"\nhint: {item['hint']}", style="dim")
        for action in item.get("next_actions", []):
            cell.append(
                f"\nnext: {action.get('tool')} {_short(action.get('arguments', {}))}",
                style="cyan",
            )
        table.add_row(str(item.get("place", "")), str(item.get("code", "")), cell)
    console.print(table)
    codes = sorted({str(item.get("code")) for item in diagnostics})
    console.print(f"(flowledger explain {codes[0]} says what a code means)", style="dim")


def _render_draft(console: Console, draft: Mapping[str, Any], verb: str = "") -> None:
    head = Text()
    if verb:
        head.append(f"{verb} ", style="green")
    head.append(f"{draft.get('draft')} revision {draft.get('revision')}", style="bold")
    count = len(draft.get("diagnostics", []))
    if draft.get("valid"):
        head.append(" valid", style="green")
    else:
        head.append(f" invalid: {count} issue{'s' if count != 1 else ''}", style="bold red")
    console.print(head, soft_wrap=True)
    if draft.get("applied"):
        ops = draft["applied"]
        console.print(f"applied {len(ops)} patch operation{'s' if len(ops) != 1 else ''}")
    if draft.get("unmapped"):
        console.print(f"arguments left to map: {', '.join(draft['unmapped'])}", style="yellow")
    bindings = draft.get("bindings") or {}
    if bindings:
        shown = ", ".join(f"{dep} -> {src}" for dep, src in sorted(bindings.items()))
        console.print(Text.assemble(("bindings: ", "dim"), shown), soft_wrap=True)
    _diagnostics(console, draft.get("diagnostics", []), "Diagnostics")


@draft_app.command(
    "create",
    help="Create a draft: from nothing (a minimal valid workflow), from a capability "
    "(--source and --tool: a one-node workflow calling it) or from a saved artifact "
    "(--artifact and --version).",
)
def create(
    name: Name,
    source: Annotated[str | None, typer.Option("--source", help="A registered source.")] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="A tool of --source.")] = None,
    artifact: Annotated[
        str | None, typer.Option("--artifact", help="A saved artifact's name.")
    ] = None,
    version: Annotated[
        str | None, typer.Option("--version", help="The saved artifact's version.")
    ] = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    origin: dict[str, str] = {}
    for key, value in (("source", source), ("tool", tool), ("artifact", artifact)):
        if value is not None:
            origin[key] = value
    if version is not None:
        origin["version"] = version

    async def work(drafts: Any) -> dict[str, Any]:
        if origin and set(origin) not in ({"source", "tool"}, {"artifact", "version"}):
            raise CliError("give --source with --tool, or --artifact with --version")
        result: dict[str, Any] = await drafts.create(name, origin or None)
        return result

    _run(db, session, work, lambda c, r, f: _render_draft(c, r, "created"), as_json, writes=True)


@draft_app.command("list", help="The session's drafts by name: revision, valid, issues.")
def list_drafts(
    query: Query = None,
    limit: Limit = None,
    cursor: Cursor = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        result: dict[str, Any] = await drafts.list(query=query, limit=limit, cursor=cursor)
        return result

    def render(console: Console, result: dict[str, Any], flags: list[str]) -> None:
        listed = result.get("drafts", [])
        if not listed:
            console.print("No drafts.", style="dim")
        else:
            table = Table(
                box=box.SIMPLE_HEAD, show_edge=False, title="Drafts", title_justify="left"
            )
            for column in ("draft", "revision", "valid", "issues", "updated"):
                table.add_column(
                    column, justify="right" if column in ("revision", "issues") else "left"
                )
            for item in listed:
                table.add_row(
                    Text(str(item["draft"]), style="bold"),
                    str(item["revision"]),
                    Text("yes", style="green") if item["valid"] else Text("no", style="red"),
                    str(item["issues"]),
                    str(item.get("updated_at", "")),
                )
            console.print(table)
        again = [*(["--query", query] if query else []), *([f"--limit={limit}"] if limit else [])]
        render_next(console, result, ["draft", "list", *again, *flags])

    _run(db, session, work, render, as_json, writes=False)


@draft_app.command("show", help="A draft: revision, validity, diagnostics (and its document).")
def show(
    name: Name,
    document: Annotated[
        bool, typer.Option("--document", help="Print the document too (JSON).")
    ] = False,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        result: dict[str, Any] = await drafts.get(name)
        return result

    def render(console: Console, result: dict[str, Any], flags: list[str]) -> None:
        _render_draft(console, result)
        if document:
            console.print_json(json.dumps(result.get("document")))

    _run(db, session, work, render, as_json, writes=False)


@draft_app.command(
    "patch",
    help="Apply an RFC 6902 JSON Patch (a JSON array of operations) to the document, all "
    "or nothing.",
)
def patch(
    name: Name,
    operations: Annotated[
        str,
        typer.Option("--ops", metavar="JSON", help="The operations (JSON, @file or -)."),
    ],
    revision: Revision = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        ops = _json("--ops", operations)
        if not isinstance(ops, list):
            raise CliError("--ops must be a JSON array of patch operations")
        result: dict[str, Any] = await drafts.patch(name, await _at(drafts, name, revision), ops)
        return result

    _run(db, session, work, lambda c, r, f: _render_draft(c, r, "patched"), as_json, writes=True)


@draft_app.command(
    "add-tool",
    help="Add a step calling TOOL of registered SOURCE: arguments pre-mapped from "
    "same-named state fields (else input properties), inserted after --after (or at the "
    "start).",
)
def add_tool(
    name: Name,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="A registered source.")],
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="One of its tools.")],
    node: Annotated[str | None, typer.Option("--node", help="The new node's id.")] = None,
    dependency: Annotated[
        str | None, typer.Option("--dependency", help="The dependency to declare or reuse.")
    ] = None,
    after: Annotated[str | None, typer.Option("--after", help="Insert after this node.")] = None,
    next: Annotated[str | None, typer.Option("--next", help="The new node's next.")] = None,
    assign: Annotated[
        str | None,
        typer.Option("--assign", metavar="JSON", help="State fields from the result (JSON)."),
    ] = None,
    revision: Revision = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        assigned = _json("--assign", assign)
        if assigned is not None and not isinstance(assigned, dict):
            raise CliError("--assign must be a JSON object")
        result: dict[str, Any] = await drafts.add_tool(
            name,
            await _at(drafts, name, revision),
            source,
            tool,
            node=node,
            dependency=dependency,
            after=after,
            next=next,
            assign=assigned,
        )
        return result

    _run(db, session, work, lambda c, r, f: _render_draft(c, r, "added"), as_json, writes=True)


@draft_app.command(
    "connect",
    help="Route node FROM to node TO: its next; a switch's case (--when) or default; a "
    "parallel's branch.",
)
def connect(
    name: Name,
    source: Annotated[str, typer.Argument(metavar="FROM", help="The node routed from.")],
    target: Annotated[str, typer.Argument(metavar="TO", help="The node routed to.")],
    when: Annotated[
        str | None, typer.Option("--when", metavar="EXPR", help="A switch case's ${ condition }.")
    ] = None,
    revision: Revision = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        result: dict[str, Any] = await drafts.connect(
            name, await _at(drafts, name, revision), source, target, when
        )
        return result

    _run(db, session, work, lambda c, r, f: _render_draft(c, r, "connected"), as_json, writes=True)


@draft_app.command(
    "set-output",
    help="Set the workflow's output: an end node's output template (JSON object, or a "
    "${ ... } string), optionally its outcome and the output schema.",
)
def set_output(
    name: Name,
    output: Annotated[
        str, typer.Argument(metavar="OUTPUT", help="A JSON object, @file, or a template string.")
    ],
    node: Annotated[str | None, typer.Option("--node", help="The end node.")] = None,
    outcome: Annotated[str | None, typer.Option("--outcome", help="Its outcome.")] = None,
    output_schema: Annotated[
        str | None,
        typer.Option("--output-schema", metavar="JSON", help="The workflow's output schema."),
    ] = None,
    revision: Revision = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        value: Any = output
        if output.startswith(("{", "@")) or output == "-":
            value = _json("OUTPUT", output)
        result: dict[str, Any] = await drafts.set_output(
            name,
            await _at(drafts, name, revision),
            value,
            node=node,
            outcome=outcome,
            output_schema=_json("--output-schema", output_schema),
        )
        return result

    _run(db, session, work, lambda c, r, f: _render_draft(c, r, "updated"), as_json, writes=True)


@draft_app.command(
    "validate",
    help="The draft's diagnostics, and its dependencies checked against the bound "
    "registered sources' last probes. Exit code 0 when deployable, 1 when not.",
)
def validate(
    name: Name,
    bind: Bind = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        result: dict[str, Any] = await drafts.validate(name, _bindings(bind))
        return result

    def render(console: Console, result: dict[str, Any], flags: list[str]) -> None:
        _render_draft(console, result)
        _diagnostics(console, result.get("bindings", []), "Bindings")
        if result.get("deployable"):
            console.print("deployable", style="green")
        else:
            console.print("not deployable", style="bold red")

    _run(db, session, work, render, as_json, writes=False, refused=lambda r: not r["deployable"])


@draft_app.command(
    "publish",
    help="Save the draft as the immutable artifact version VERSION; with --deploy, also a "
    "live deployment binding each dependency to its registered source.",
)
def publish(
    name: Name,
    version: Annotated[str, typer.Argument(metavar="VERSION", help="The artifact version.")],
    deploy: Annotated[bool, typer.Option("--deploy", help="Also save a live deployment.")] = False,
    deployment: Annotated[
        str | None,
        typer.Option("--deployment", help="The deployment's name. \\[default: the artifact's]"),
    ] = None,
    bind: Bind = None,
    revision: Revision = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        result: dict[str, Any] = await drafts.publish(
            name,
            await _at(drafts, name, revision),
            version,
            deploy=deploy,
            deployment=deployment,
            bindings=_bindings(bind),
        )
        return result

    def render(console: Console, result: dict[str, Any], flags: list[str]) -> None:
        artifact = result["artifact"]
        console.print(
            Text.assemble(
                ("published ", "green"),
                (f"{artifact['name']}@{artifact['version']}", "bold"),
                (f" sha256:{artifact['digest']}", "dim"),
            ),
            soft_wrap=True,
        )
        saved = result.get("deployment")
        if saved:
            console.print(
                Text.assemble(
                    ("deployed ", "green"),
                    (f"{saved['name']} revision {saved['revision']}", "bold"),
                    (" (live)" if saved.get("live") else "", "dim"),
                ),
                soft_wrap=True,
            )

    _run(db, session, work, render, as_json, writes=True)


@draft_app.command("delete", help="Delete a draft (only at --revision N, when given).")
def delete(
    name: Name,
    revision: Revision = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(drafts: Any) -> dict[str, Any]:
        result: dict[str, Any] = await drafts.delete(name, revision)
        return result

    def render(console: Console, result: dict[str, Any], flags: list[str]) -> None:
        console.print(
            Text.assemble(
                ("deleted ", "green"), (f"draft {name} (revision {result['revision']})", "bold")
            ),
            soft_wrap=True,
        )

    _run(db, session, work, render, as_json, writes=True)
