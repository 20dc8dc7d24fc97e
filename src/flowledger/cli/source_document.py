"""The ``flowledger.source/v1`` document that ``source add`` and ``source set`` save: read
from a file (YAML or JSON; ``-`` is stdin), or built from flags.

The flags build exactly the document a file would hold, so everything a document can
say but ``secrets.<name>.sessions`` has a flag:

* ``--stdio 'CMD ARGS'`` (split as a shell would) with ``--env NAME=VALUE`` and
  ``--cwd DIR``, or ``--url URL`` with ``--header NAME=VALUE``. A value written
  ``secret:SECRET`` is a reference, ``{secret: SECRET}`` (a literal value that starts
  with ``secret:`` needs a file);
* ``--secret SECRET[=VAR]`` declares a secret, read from variable ``VAR`` (default: its
  own name) of the process that connects the source;
* ``--python MODULE[:FUNCTION,...]`` with ``--read-only FUNCTION`` and ``--idempotent
  FUNCTION`` (the operator's annotations), or ``--builtin`` (the standard library);
* ``--openapi DOCUMENT --base-url URL`` (a path, made absolute, or a URL) with
  ``--operation ID`` (repeatable: these operations only) and ``--auth-header
  NAME=SECRET`` or ``--auth-query NAME=SECRET`` (a secret declared with ``--secret``);
* ``--session UUID`` (visibility), ``--allow-tool``, ``--call-tool``, ``--description``.

Bad flags are usage errors (typer's, exit code 2); a document that is not valid is the
validation's one-line message (exit code 1). Values are never echoed: they may be
credentials.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Final

import typer

from .runtime import CliError

__all__ = ["FLAG_OPTIONS", "SECRET_PREFIX", "document_from_flags", "read_document_file"]

#: How a flag value refers to a declared secret instead of giving a literal.
SECRET_PREFIX: Final = "secret:"
#: The options that build a document (refused with a FILE).
FLAG_OPTIONS: Final = (
    "--base-url",
    "--operation",
    "--auth-header",
    "--auth-query",
    "--read-only",
    "--idempotent",
    "--env",
    "--header",
    "--cwd",
    "--secret",
    "--session",
    "--allow-tool",
    "--call-tool",
    "--description",
)


def read_document_file(file: str) -> bytes:
    """The bytes of ``file`` (``-``: stdin); an unreadable one is `CliError`."""
    if file == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(file).read_bytes()
    except FileNotFoundError:
        raise CliError(
            f"no such file {file!r} (give a flowledger.source/v1 file, or NAME with --stdio "
            "or --url)"
        ) from None
    except OSError as exc:
        raise CliError(f"cannot read {file!r}: {exc.strerror or exc}") from None


def _values(option: str, given: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` / ``NAME=secret:SECRET`` items, by name."""
    found: dict[str, Any] = {}
    for item in given:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise typer.BadParameter(
                f"expected NAME=VALUE or NAME={SECRET_PREFIX}SECRET", param_hint=option
            )
        if name in found:
            raise typer.BadParameter(f"{name} is given twice", param_hint=option)
        found[name] = (
            {"secret": value[len(SECRET_PREFIX) :]} if value.startswith(SECRET_PREFIX) else value
        )
    return found


def _secrets(given: list[str]) -> dict[str, Any]:
    declared: dict[str, Any] = {}
    for item in given:
        name, equals, variable = item.partition("=")
        if not name or (equals and not variable):
            raise typer.BadParameter("expected SECRET or SECRET=VARIABLE", param_hint="--secret")
        if name in declared:
            raise typer.BadParameter(f"secret {name} is declared twice", param_hint="--secret")
        declared[name] = {"env": variable} if equals else {}
    return declared


def _python(given: str, read_only: list[str], idempotent: list[str]) -> dict[str, Any]:
    """``MODULE[:FUNCTION,...]`` and the annotations as a ``python`` entry."""
    module, colon, names = given.partition(":")
    spec: dict[str, Any] = {"module": module}
    if colon:
        functions = [name.strip() for name in names.split(",")]
        if not all(functions):
            raise typer.BadParameter(
                "expected MODULE or MODULE:FUNCTION,FUNCTION", param_hint="--python"
            )
        spec["functions"] = functions
    if read_only:
        spec["read_only"] = read_only
    if idempotent:
        spec["idempotent"] = idempotent
    return spec


def _openapi(
    document: str,
    base_url: str | None,
    operations: list[str],
    auth_header: str | None,
    auth_query: str | None,
) -> dict[str, Any]:
    """The flags of ``--openapi`` as an ``openapi`` entry."""
    if base_url is None:
        raise typer.BadParameter("--openapi needs --base-url URL", param_hint="--base-url")
    if not document.startswith(("http://", "https://")):
        document = str(Path(document).absolute())  # the connecting process may run elsewhere
    spec: dict[str, Any] = {"document": document, "base_url": base_url}
    if operations:
        spec["operations"] = operations
    if auth_header is not None and auth_query is not None:
        raise typer.BadParameter(
            "give one of --auth-header and --auth-query", param_hint="--auth-header"
        )
    for option, where, given in (
        ("--auth-header", "header", auth_header),
        ("--auth-query", "query", auth_query),
    ):
        if given is not None:
            name, equals, secret = given.partition("=")
            if not equals or not name or not secret:
                raise typer.BadParameter("expected NAME=SECRET", param_hint=option)
            spec["auth"] = {where: name, "secret": secret}
    return spec


def document_from_flags(
    name: str,
    *,
    openapi: str | None = None,
    base_url: str | None = None,
    operations: list[str] | None = None,
    auth_header: str | None = None,
    auth_query: str | None = None,
    stdio: str | None,
    url: str | None,
    env: list[str],
    python: str | None = None,
    builtin: bool = False,
    read_only: list[str] | None = None,
    idempotent: list[str] | None = None,
    headers: list[str],
    cwd: str | None,
    secrets: list[str],
    sessions: list[str],
    allow_tools: list[str],
    call_tools: list[str],
    description: str | None,
) -> dict[str, Any]:
    """The source document the flags describe (JSON data, not validated yet)."""
    kinds = [stdio is not None, url is not None, python is not None, builtin, openapi is not None]
    if sum(kinds) != 1:
        raise typer.BadParameter(
            "give exactly one of --stdio, --url, --python, --builtin and --openapi",
            param_hint="--stdio/--url/--python/--builtin/--openapi",
        )
    if openapi is None and (base_url or operations or auth_header or auth_query):
        raise typer.BadParameter(
            "--base-url, --operation, --auth-header and --auth-query go with --openapi",
            param_hint="--base-url",
        )
    document: dict[str, Any] = {"format": "flowledger.source/v1", "name": name}
    if description is not None:
        document["description"] = description
    if (read_only or idempotent) and python is None:
        raise typer.BadParameter(
            "--read-only and --idempotent annotate functions of --python",
            param_hint="--read-only/--idempotent",
        )
    if python is not None or builtin or openapi is not None:
        if env or cwd is not None or headers:
            raise typer.BadParameter(
                "--env, --cwd and --header go with --stdio or --url", param_hint="--env"
            )
        if openapi is not None:
            document["openapi"] = _openapi(
                openapi, base_url, operations or [], auth_header, auth_query
            )
        elif builtin:
            document["builtin"] = {}
        else:
            document["python"] = _python(python or "", read_only or [], idempotent or [])
    elif stdio is not None:
        if headers:
            raise typer.BadParameter("--header needs --url", param_hint="--header")
        try:
            words = shlex.split(stdio)
        except ValueError as exc:
            raise typer.BadParameter(
                f"cannot split the command line: {exc}", param_hint="--stdio"
            ) from None
        if not words:
            raise typer.BadParameter("the command line is empty", param_hint="--stdio")
        transport: dict[str, Any] = {"command": words[0], "args": words[1:]}
        if env:
            transport["env"] = _values("--env", env)
        if cwd is not None:
            transport["cwd"] = cwd
        document["stdio"] = transport
    else:
        if env or cwd is not None:
            raise typer.BadParameter("--env and --cwd need --stdio", param_hint="--env/--cwd")
        document["http"] = {"url": url}
        if headers:
            document["http"]["headers"] = _values("--header", headers)
    if secrets:
        document["secrets"] = _secrets(secrets)
    if sessions:
        document["sessions"] = sessions
    if allow_tools:
        document["allow_tools"] = allow_tools
    if call_tools:
        document["call_tools"] = call_tools
    return document
