"""What a ``flowledger`` process imports before a command runs.

Every CLI process (and CI runs dozens) used to import the whole library at start: the
deploy layer, the MCP SDK client and server, the search index, JSON Schema. The CLI now
imports the library inside the command that needs it. These tests look at
``sys.modules`` in a fresh interpreter (one subprocess each, no timing): after
``import flowledger.cli``, after every command's ``--help``, and after ``import
flowledger``; and that a command which needs the deploy layer still loads it (so the
check can see an import when there is one).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

# Packages no command's start-up or help needs. A name also stands for its submodules.
HEAVY = (
    "mcp",
    "starlette",
    "uvicorn",
    "tantivy",
    "jsonschema",
    "flowledger.deploy",
    "prometheus_client",
)
# The engine and the workflow layer: only commands that open a database need them.
LIBRARY = ("flowledger.workflows", "flowledger.tools", "flowledger.flow", "flowledger.host")
# Surfaces served by their own commands.
SERVERS = ("flowledger.mcp", "flowledger.web")


def _imported(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def _python(code: str) -> Any:
    """Run ``code`` in a fresh interpreter; it prints one JSON document last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_cli_pulls_in_no_library() -> None:
    modules = _python(
        """
        import json, sys
        import flowledger.cli
        print(json.dumps(sorted(sys.modules)))
        """
    )
    assert "flowledger.cli" in modules
    assert _imported(modules, HEAVY) == []
    assert _imported(modules, LIBRARY) == []
    assert _imported(modules, SERVERS) == []


def test_every_help_stays_light_and_a_command_still_loads_what_it_needs() -> None:
    """The root's ``--help`` and that of every top-level command and group render
    without the library (the leaves of the groups are built the same way; rendering
    every page costs seconds of CI); then ``explain``, which reads the deploy layer's
    table, imports it and answers."""
    result = _python(
        """
        import io, json, sys
        from contextlib import redirect_stdout

        from flowledger.cli import app
        import typer

        root = typer.main.get_command(app)
        failures = []
        pages = 0
        for path in [[], *([name] for name in sorted(root.commands))]:
            out = io.StringIO()
            try:
                with redirect_stdout(out):
                    app([*path, "--help"], prog_name="flowledger")
            except SystemExit as exc:
                if exc.code != 0:
                    failures.append([path, exc.code])
            if "Usage: flowledger" not in out.getvalue():
                failures.append([path, "no usage line"])
            pages += 1
        after_help = sorted(sys.modules)
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                app(["explain", "revision_conflict", "--json"], prog_name="flowledger")
        except SystemExit as exc:
            assert exc.code == 0, exc.code
        print(json.dumps({
            "pages": pages,
            "failures": failures,
            "after_help": after_help,
            "after_explain": sorted(sys.modules),
            "explain": json.loads(out.getvalue()),
        }))
        """
    )
    assert result["failures"] == []
    assert result["pages"] > 20  # every top-level command and group, not just the root
    assert _imported(result["after_help"], HEAVY) == []
    assert _imported(result["after_help"], LIBRARY) == []
    assert result["explain"]["code"] == "revision_conflict"
    # the check sees an import when there is one: explain loaded the deploy layer
    assert "flowledger.deploy" in _imported(result["after_explain"], HEAVY)


def test_python_dash_m_help_pulls_in_no_library() -> None:
    modules = _python(
        """
        import io, json, runpy, sys
        from contextlib import redirect_stdout

        sys.argv = ["flowledger", "--help"]
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                runpy.run_module("flowledger", run_name="__main__")
        except SystemExit as exc:
            assert exc.code == 0, exc.code
        assert "Commands" in out.getvalue(), out.getvalue()
        print(json.dumps(sorted(sys.modules)))
        """
    )
    assert _imported(modules, HEAVY) == []
    assert _imported(modules, LIBRARY) == []


def test_import_flowledger_is_the_version_only() -> None:
    """``import flowledger`` (and README's ``from flowledger import flow``) load no
    transport, deploy layer or server."""
    modules = _python(
        """
        import json, sys
        import flowledger
        bare = sorted(sys.modules)
        from flowledger import flow
        print(json.dumps({"bare": bare, "flow": sorted(sys.modules)}))
        """
    )
    assert _imported(modules["bare"], HEAVY + LIBRARY + SERVERS) == []
    assert _imported(modules["flow"], HEAVY + SERVERS) == []
