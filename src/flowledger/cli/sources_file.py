"""``--sources FILE`` of ``flowledger mcp``, ``web`` and ``worker``: the operator's
sources file, reconciled into the registry before the command serves or works
(`flowledger.deploy.registry.reconcile.reconcile_file`; ``flowledger mcp`` does it in
`flowledger.mcp.serve`). What it did goes to stderr, one line per source and one naming
the registered sources the file leaves alone; an unusable file is one ``error:`` line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .runtime import CliError, stderr_console

__all__ = ["SourcesOption", "reconcile_sources"]

SourcesOption = Annotated[
    str | None,
    typer.Option(
        "--sources",
        metavar="FILE",
        help="The operator's sources: a YAML/JSON list of flowledger.source/v1 documents, "
        "or a directory of them, reconciled into the registry first (a changed one gets "
        "a new revision; registered sources not in it are left alone).",
        show_default=False,
    ),
]


async def reconcile_sources(url: str, path: str) -> None:
    from ..deploy.registry.reconcile import SourcesFileError, reconcile_file

    try:
        done = await reconcile_file(url, path)
    except SourcesFileError as exc:
        raise CliError(f"--sources: {exc}") from None
    console = stderr_console()
    for line in done.lines():
        console.print(line, soft_wrap=True, markup=False, highlight=False)
