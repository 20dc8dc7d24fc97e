"""``flowledger artifact``: the artifact format's schema, checking a file offline, and
the session's saved artifacts.

``schema`` and ``validate`` open no database: ``schema`` prints the JSON Schema of
``flowledger.artifact/v1`` (generated from the pydantic models), ``validate`` runs
every static check on a YAML or JSON file and prints each problem with its place.
``save FILE`` writes an artifact version into the session, ``delete NAME VERSION``
removes one nothing uses any more; ``list`` (paged: ``--query``, ``--limit``,
``--cursor``) and ``show NAME VERSION`` read them (the database opened read-only), like
the ``deploy`` commands (`DeployService`'s results; ``--json`` prints them as one line
of JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer
from rich.text import Text

from .deploy import Cursor, Db, Json, Limit, Query, Session, run_service
from .deploy_render import (
    render_artifact,
    render_artifact_saved,
    render_artifacts,
    render_deleted,
    render_next,
)
from .runtime import CliError, emit_json, fail, stdout_console

__all__ = ["artifact_app"]

artifact_app = typer.Typer(
    help="Workflow artifacts (flowledger.artifact/v1): the format's schema, validation, "
    "and the session's saved versions.",
    no_args_is_help=True,
)

_FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


@artifact_app.command(
    "schema",
    help="Print the JSON Schema of the artifact format (its structure; `validate` checks "
    "the rest).",
)
def schema() -> None:
    # Imported here, not at module level: every other command starts without the cost.
    from ..deploy import artifact_json_schema

    sys.stdout.write(json.dumps(artifact_json_schema(), indent=2, ensure_ascii=False) + "\n")


@artifact_app.command(
    "validate",
    help="Check an artifact file without saving it: every problem, each with its place. "
    "Exit code 0 when it is valid, 1 when it is not.",
)
def validate(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="An artifact in YAML or JSON.")],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="yaml|json",
            help="The file's syntax. \\[default: from the extension, else detected]",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (for scripts).")
    ] = False,
) -> None:
    from ..deploy import ArtifactValidationError, load_artifact
    from ..deploy.artifacts.limits import MAX_SOURCE_BYTES

    if format not in (None, "yaml", "json"):
        fail(f"--format must be yaml or json, not {format!r}")
    chosen = cast(Literal["yaml", "json"] | None, format or _FORMATS.get(file.suffix.lower()))
    try:
        if file.stat().st_size > MAX_SOURCE_BYTES:
            fail(f"{file} is over {MAX_SOURCE_BYTES} bytes, the limit of an artifact document")
        source = file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    try:
        validated = load_artifact(source, format=chosen)
    except ArtifactValidationError as exc:
        if as_json:
            emit_json({"valid": False, "issues": exc.to_json(), "truncated": exc.truncated})
        else:
            console = stdout_console()
            count = len(exc.issues)
            console.print(
                Text(f"{file}: {count} problem{'s' if count != 1 else ''}", style="bold red")
            )
            for issue in exc.issues:
                line = Text.assemble((issue.place, "bold"), ": ", issue.message)
                if issue.hint:
                    line.append(f"\n    hint: {issue.hint}", style="dim")
                console.print(line, soft_wrap=True)
            if exc.truncated:
                console.print("(more problems were not listed)", style="dim")
        raise typer.Exit(1) from None
    if as_json:
        emit_json(
            {
                "valid": True,
                "name": validated.name,
                "version": validated.version,
                "digest": validated.digest,
            }
        )
        return
    stdout_console().print(
        Text.assemble(
            ("valid: ", "green"),
            (f"{validated.name}@{validated.version}", "bold"),
            (f" sha256:{validated.digest}", "dim"),
        ),
        soft_wrap=True,
    )


@artifact_app.command(
    "save", help="Save an artifact (YAML or JSON) in the session: immutable, by version."
)
def save(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="An artifact in YAML or JSON.")],
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        try:
            source = file.read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {file}: {exc.strerror or exc}") from None
        result: dict[str, Any] = await service.artifact_save(source)
        return result

    run_service(
        db, session, work, lambda c, r, f: render_artifact_saved(c, r), as_json, writes=True
    )


@artifact_app.command("list", help="The session's saved artifacts by name: versions, digests.")
def list_artifacts(
    query: Query = None,
    limit: Limit = None,
    cursor: Cursor = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.artifact_list(
            query=query, limit=limit, cursor=cursor
        )
        return result

    def render(console: Any, result: dict[str, Any], flags: list[str]) -> None:
        render_artifacts(console, result)
        again = [*(["--query", query] if query else []), *([f"--limit={limit}"] if limit else [])]
        render_next(console, result, ["artifact", "list", *again, *flags])

    run_service(db, session, work, render, as_json)


@artifact_app.command(
    "delete",
    help="Delete a saved version; refused while a parent artifact pins it or a deployment "
    "revision runs it. A deleted version is never reused.",
)
def delete(
    name: str, version: str, db: Db = None, session: Session = None, as_json: Json = False
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.artifact_delete(name, version)
        return result

    run_service(db, session, work, lambda c, r, f: render_deleted(c, r), as_json, writes=True)


@artifact_app.command("show", help="One saved artifact version: its document and digests.")
def show(
    name: str,
    version: str,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.artifact_show(name, version)
        return result

    run_service(db, session, work, lambda c, r, f: render_artifact(c, r), as_json)
