"""The usability issue through the MCP SDK client: errors a model can act on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from .._readonly import read_only_command
from .conftest import APP, REPO, error_text, payload, stdio_params, wait_status


async def test_schema_errors_name_every_violation(tmp_path: Path) -> None:
    """Usability 1: a tool error lists each violation of the input and of the arguments."""
    db = f"sqlite:///{tmp_path}/m.db"
    async with Client(stdio_params(db, "--app", APP)) as client:
        refused = await client.call_tool(
            "workflow_run_start",
            {
                "definition_name": "relay",
                "definition_version": "v1",
                "input": {"secret": 7, "extra": "private words"},
            },
        )
        assert error_text(refused) == (
            "workflow tools: invalid input: $.extra: additional property not allowed; "
            "$.secret: expected a string, got a number"
        )
        arguments = await client.call_tool("workflow_run_list", {"limit": "ten", "page": 2})
        assert error_text(arguments) == (
            "workflow tools: invalid arguments: unknown field 'page'; "
            "field 'limit' must be an integer, not a string"
        )


def test_a_read_only_server_never_creates_a_database(tmp_path: Path) -> None:
    """Usability 3: ``flowledger mcp --read-only`` on a mistyped --db says so and exits."""
    missing = tmp_path / "typo.db"
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", "mcp", "--read-only", "--db", f"sqlite:///{missing}"],
        cwd=REPO,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert f"no database at {missing}" in done.stderr
    assert list(tmp_path.iterdir()) == []


async def test_a_read_only_server_reads_a_read_only_directory(tmp_path: Path) -> None:
    """Usability 3: a read-only server serves a database nobody may write."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    db = f"sqlite:///{shelf}/runs.db"
    async with Client(stdio_params(db, "--app", APP)) as client:
        started = payload(
            await client.call_tool(
                "workflow_run_start",
                {"definition_name": "relay", "definition_version": "v1", "input": {"secret": "s"}},
            )
        )
        await wait_status(client, started["run_id"], "interrupted")
    plain = stdio_params(db, "--app", APP, "--read-only")
    argv = read_only_command(shelf, [plain.command, *plain.args])
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=plain.cwd)
    try:
        async with Client(params) as client:
            listed = payload(await client.call_tool("workflow_run_list", {}))
            assert [run["run_id"] for run in listed["runs"]] == [started["run_id"]]
            got = payload(await client.call_tool("workflow_run_get", {"run_id": started["run_id"]}))
            assert got["run_status"] == "interrupted"
    finally:
        shelf.chmod(0o755)
    assert sorted(path.name for path in shelf.iterdir()) == ["runs.db"]


LOOSE_APP = """
from pydantic import BaseModel

from flowledger import flow
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata


class Tally(BaseModel):
    count: int = 0


def catalog():
    graph = flow.Graph("tally", state=Tally)
    graph.add_vertex("add", lambda state: {"count": state.count + 1})
    schema = {"type": "object", "additionalProperties": False, "properties": {"count": {}}}
    metadata = Metadata(
        "tally", "v1", description="Adds one.", input_schema=schema,
        vertices=[VertexMetadata("add", "add")],
    )
    tallies = Catalog()
    tallies.register(TypedDefinition(metadata, graph.compile(entry="add", finish="add")))
    return tallies
"""


async def test_a_decoder_failure_is_the_definitions_error(tmp_path: Path) -> None:
    """Usability 2: the model is told the definition is broken, not that its input is."""
    (tmp_path / "loose_mcp_app.py").write_text(LOOSE_APP, encoding="utf-8")
    plain = stdio_params(f"sqlite:///{tmp_path}/m.db", "--app", "loose_mcp_app:catalog")
    params = StdioServerParameters(command=plain.command, args=plain.args, cwd=str(tmp_path))
    async with Client(params) as client:
        refused = await client.call_tool(
            "workflow_run_start",
            {"definition_name": "tally", "definition_version": "v1", "input": {"count": "many"}},
        )
        assert error_text(refused) == (
            "workflow tools: validate input: workflow definition 'tally' version 'v1' is broken "
            "(not your input): its input decoder refused a document that passed its input "
            "schema at state field count"
        )
        assert payload(await client.call_tool("workflow_run_list", {}))["runs"] == []


def test_an_app_that_raises_while_loading_says_so(tmp_path: Path) -> None:
    """Usability 2: ``flowledger mcp --app`` whose module raises names it on stderr."""
    (tmp_path / "exploding_app.py").write_text(
        "raise RuntimeError('no API key configured')\n", encoding="utf-8"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowledger",
            "mcp",
            "--app",
            "exploding_app:catalog",
            "--db",
            f"sqlite:///{tmp_path}/m.db",
        ],
        cwd=tmp_path,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert (
        "while loading --app exploding_app:catalog: RuntimeError: no API key configured"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
