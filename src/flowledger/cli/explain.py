"""``flowledger explain CODE [--json]``: what a diagnostic or error code means, how to fix
it, and a small example (`flowledger.deploy.drafts.explain`). Nothing is opened: the
answers are part of the program. An unknown code is one line on stderr and exit 1."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from .runtime import emit_json, stdout_console

__all__ = ["register_explain"]


def explain_command(
    code: Annotated[str, typer.Argument(help="A code, such as revision_conflict.")],
    json_output: Annotated[bool, typer.Option("--json", help="One line of JSON.")] = False,
) -> None:
    # imported here: the table lives in the deploy layer, which `flowledger` loads only
    # for the commands that use it
    from ..deploy.drafts.explain import UnknownCodeError, explain

    try:
        entry = explain(code)
    except UnknownCodeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if json_output:
        emit_json(entry)
        return
    console = stdout_console()
    console.print(Text(entry["code"], style="bold"))
    for label in ("cause", "fix", "example"):
        console.print(Text.assemble((f"{label}: ", "dim"), entry[label]), soft_wrap=True)


def register_explain(app: typer.Typer) -> None:
    app.command("explain", help="What a diagnostic or error code means, its fix, an example.")(
        explain_command
    )
