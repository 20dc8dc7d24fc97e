"""Artifacts run durably on the flow engine against real MCP servers (mcp-server-time and
server-everything over stdio and HTTP): pauses in the parent and inside a child, resume
from another process, parallel branches of unequal length joined, the trace, and every
way a tool call fails ending the run ``failed`` (never an implicit pause)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import (
    HttpSource,
    Source,
    StdioSource,
    compile_artifact,
    validate_artifact,
)
from flowledger.storage import open_store
from flowledger.tools import WorkflowTools
from flowledger.workflows import Catalog, Definition, SessionOwnedError
from flowledger.workflows.runtime.session import WorkflowSession

from .._postgres import postgres_url
from .runs.app import artifact
from .servers import REPO

DIGEST_INPUT = {"city": "Oslo", "a": 3, "b": 9, "review": True}
APP = ["--app", "tests.deploy.runs.app:catalog"]


@asynccontextmanager
async def session(
    url: str, catalog: Catalog
) -> AsyncIterator[tuple[WorkflowSession, WorkflowTools]]:
    async with open_store(url) as store:
        built = WorkflowSession.build(store, SESSION, catalog)
        await built.supervisor.activate()
        tools = WorkflowTools.for_session(built)
        try:
            yield built, tools
        finally:
            await built.supervisor.shutdown()


SESSION = str(uuid.UUID(int=7, version=4))


def digest_catalog(clock: Source, everything: Source) -> Catalog:
    catalog = Catalog()
    catalog.register(
        compile_artifact(
            artifact("digest"),
            children={"sign_off": artifact("sign_off")},
            sources={"clock": clock, "everything": everything},
        )
    )
    return catalog


async def settle(built: WorkflowSession, tools: WorkflowTools, run_id: str) -> dict[str, Any]:
    await built.supervisor.wait_idle()
    return await tools.call("workflow_run_get", {"run_id": run_id})


async def start(tools: WorkflowTools, name: str, document: Mapping[str, Any]) -> str:
    started = await tools.call(
        "workflow_run_start",
        {"definition_name": name, "definition_version": "1", "input": dict(document)},
    )
    return str(started["run_id"])


async def outcome(built: WorkflowSession, name: str, run_id: str) -> dict[str, Any]:
    run = await built.registry.get(built.session_id, run_id)
    result = await built.catalog.resolve(name, "1").get(run.graph_run_id)
    return result.state


async def trace_of(built: WorkflowSession, name: str, run_id: str) -> Any:
    run = await built.registry.get(built.session_id, run_id)
    definition: Definition = built.catalog.resolve(name, "1")
    return await definition.trace.read(run.graph_run_id, limit=100)  # type: ignore[attr-defined]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'deploy.db'}"
    else:
        with postgres_url() as found:
            yield found


async def test_an_artifact_runs_through_two_pauses_on_every_backend(
    url: str, time_server: StdioSource, everything: StdioSource
) -> None:
    """Testing Strategy: persisted RunState round-trip for root interrupts and for native
    child-subgraph interrupts; a completed run saved with output and terminal outcome.
    Parent interrupt, clock, a parallel join of unequal branches, a switch, a child
    that interrupts, then the end: the output, the state's reducers, the pending
    questions with each node's own resume schema, and the trace."""
    async with session(url, digest_catalog(time_server, everything)) as (built, tools):
        run_id = await start(tools, "daily_digest", DIGEST_INPUT)
        first = await settle(built, tools, run_id)
        assert first["run_status"] == "interrupted"
        assert first["pending"]["vertex_id"] == "confirm"
        assert first["pending"]["info"] == {
            "question": "Make a digest for this city?",
            "city": "Oslo",
        }
        assert first["pending"]["resume_schema"]["required"] == ["go"]
        wrong = await tools.call("workflow_run_get", {"run_id": run_id})
        assert wrong == first
        with pytest.raises(Exception, match="invalid resume"):
            await tools.call(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )

        second = await tools.call("workflow_run_resume", {"run_id": run_id, "resume": {"go": True}})
        assert second["run_status"] == "interrupted"
        pending = second["pending"]
        assert pending["vertex_id"] == "review__ask"
        assert pending["vertex_label"] == "Sign-off: Approve the digest"
        summary = "The sum of 3 and 9 is 12. | Echo: Oslo | added"
        assert pending["info"] == {"question": "Approve this digest?", "summary": summary}
        assert pending["resume_schema"]["required"] == ["approved"]

        done = await tools.call(
            "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
        )
        assert done["run_status"] == "completed"
        assert done["status_summary"] == "outcome reviewed"
        state = await outcome(built, "daily_digest", run_id)
        assert state["$outcome"] == "reviewed"
        assert state["$output"] == {"summary": summary, "approved": True}
        assert state["now"].endswith("+00:00")
        page = await trace_of(built, "daily_digest", run_id)
    nodes = [(e.node, e.status) for e in page.entries]
    assert nodes == [
        ("confirm", "paused"),
        ("confirm", "ok"),
        ("check", "ok"),
        ("clock", "ok"),
        ("fan", "ok"),
        ("add", "ok"),
        ("shout", "ok"),
        ("mark", "ok"),
        ("decide", "ok"),
        ("review", "ok"),
        ("review/ask", "paused"),
        ("review/ask", "ok"),
        ("review/done", "ok"),
        ("reviewed", "ok"),
    ]
    assert page.total == len(nodes)
    clock = page.entries[3]
    assert (clock.dependency, clock.tool) == ("clock", "get_current_time")
    assert json.loads(clock.arguments) == {"timezone": "Etc/UTC"}


def cli(
    *args: str, db: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--db", db, *APP],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def shown(run_id: str, db: str) -> dict[str, Any]:
    result = cli("runs", "show", run_id, "--json", db=db)
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def latest_run(db: str) -> str:
    result = cli("runs", "list", "--json", db=db)
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    return str(max(runs, key=lambda r: r["created_at"])["run_id"])


def test_pauses_are_resumed_from_new_processes(tmp_path: Path, everything: StdioSource) -> None:
    """Testing Strategy: persisted RunState round-trip for root and child-subgraph
    interrupts, across processes. Each step in its own ``flowledger`` process over one
    SQLite file: the run pauses in the parent, then inside the child, and completes."""
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    started = cli("start", "daily_digest", "1", "--input", json.dumps(DIGEST_INPUT), db=db)
    assert started.returncode == 0, started.stderr
    run_id = latest_run(db)
    assert shown(run_id, db)["pending"]["vertex_id"] == "confirm"
    resumed = cli("resume", run_id, "--payload", '{"go": true}', db=db)
    assert resumed.returncode == 0, resumed.stderr
    assert shown(run_id, db)["pending"]["vertex_id"] == "review__ask"
    finished = cli("resume", run_id, "--payload", '{"approved": false}', db=db)
    assert finished.returncode == 0, finished.stderr
    final = shown(run_id, db)
    assert (final["run_status"], final["status_summary"]) == ("completed", "outcome reviewed")


# -- failures: never an implicit pause -------------------------------------------------------


def one_call(tool: str, arguments: Mapping[str, Any], *, timeout: float = 60) -> Any:
    """An artifact of one tool node of the dependency ``dep``."""
    return validate_artifact(
        {
            "format": "flowledger.artifact/v1",
            "name": "one_call",
            "version": "1",
            "input_schema": {"type": "object", "additionalProperties": False},
            "output_schema": {"type": "object", "additionalProperties": False},
            "dependencies": {"dep": {"tools": [tool]}},
            "start": "call",
            "nodes": {
                "call": {
                    "kind": "tool",
                    "dependency": "dep",
                    "tool": tool,
                    "arguments": dict(arguments),
                    "timeout": timeout,
                    "next": "done",
                },
                "done": {"kind": "end", "outcome": "done"},
            },
        }
    )


async def failed_run(url: str, source: Source, validated: Any) -> dict[str, Any]:
    """Testing Strategy: a failed run saved with error details. The run fails (never an
    implicit pause), its trace entry names the error, and a new session over the same
    database reads the same failure back."""
    catalog = Catalog()
    catalog.register(compile_artifact(validated, sources={"dep": source}))
    async with session(url, catalog) as (built, tools):
        run_id = await start(tools, "one_call", {})
        got = await settle(built, tools, run_id)
        kinds = [
            e["kind"]
            for e in (await tools.call("workflow_run_history", {"run_id": run_id}))["entries"]
        ]
        page = await trace_of(built, "one_call", run_id)
    async with session(url, catalog) as (_, reopened):  # the failure was saved, not only shown
        assert await reopened.call("workflow_run_get", {"run_id": run_id}) == got
    assert got["run_status"] == "failed", got
    assert "pending" not in got and "run_interrupted" not in kinds
    assert kinds[-1] == "run_failed"
    assert [e.status for e in page.entries] == ["error"]
    assert page.entries[0].error_type == got["error"]["type"]
    return got


async def test_a_tool_error_result_fails_the_run(tmp_path: Path, time_server: StdioSource) -> None:
    got = await failed_run(
        f"sqlite:///{tmp_path / 'f.db'}",
        time_server,
        one_call("get_current_time", {"timezone": "Nowhere/Atlantis"}),
    )
    assert got["error"]["type"] == "ToolErrorResult"
    assert "dep.get_current_time answered with an error" in got["error"]["message"]
    assert "Nowhere/Atlantis" in got["error"]["message"]


async def test_an_unknown_tool_fails_the_run(tmp_path: Path, everything: StdioSource) -> None:
    got = await failed_run(
        f"sqlite:///{tmp_path / 'f.db'}", everything, one_call("no-such-tool", {})
    )
    assert got["error"]["type"] == "ToolNotFoundError"
    assert "no-such-tool" in got["error"]["message"]


async def test_arguments_that_do_not_match_fail_before_calling(
    tmp_path: Path, everything: StdioSource
) -> None:
    got = await failed_run(
        f"sqlite:///{tmp_path / 'f.db'}", everything, one_call("get-sum", {"a": "three"})
    )
    assert got["error"]["type"] == "ToolArgumentsError"
    assert "the tool was not called" in got["error"]["message"]
    assert "$.a" in got["error"]["message"] and "'b'" in got["error"]["message"]


async def test_a_timeout_fails_the_run(tmp_path: Path, everything: StdioSource) -> None:
    got = await failed_run(
        f"sqlite:///{tmp_path / 'f.db'}",
        everything,
        one_call("trigger-long-running-operation", {"duration": 30, "steps": 3}, timeout=1),
    )
    assert got["error"]["type"] == "ToolCallTimeoutError"


async def test_a_server_killed_mid_call_fails_the_run(
    tmp_path: Path, everything_http_process: tuple[str, subprocess.Popen[bytes]]
) -> None:
    """Testing Strategy: transport failure during execution produces failed, not
    interrupted."""
    url, process = everything_http_process
    validated = one_call("trigger-long-running-operation", {"duration": 30, "steps": 30})

    async def kill_soon() -> None:
        await asyncio.sleep(1.0)  # the call is under way by then (it lasts 30 s)
        process.send_signal(signal.SIGKILL)

    killer = asyncio.ensure_future(kill_soon())
    try:
        got = await failed_run(f"sqlite:///{tmp_path / 'f.db'}", HttpSource(url), validated)
    finally:
        await killer
    assert got["error"]["type"] in {"ConnectionLostError", "ToolCallRejectedError"}, got["error"]


# -- a crash while a tool runs ------------------------------------------------------------


@asynccontextmanager
async def adopting(url: str, catalog: Catalog) -> AsyncIterator[WorkflowSession]:
    """Own the database's default session once the killed owner's lease has expired."""
    from flowledger.host import open_session

    deadline = time.monotonic() + 120
    while True:
        try:
            async with open_session(url, catalog) as owned:
                yield owned
                return
        except SessionOwnedError:
            assert time.monotonic() < deadline, "the killed owner's lease never expired"
            await asyncio.sleep(0.2)


def wait_for(predicate: Any, what: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [("append_line", "failed"), ("count_lines", "completed")],
)
async def test_a_crash_mid_call_never_repeats_a_tool_that_is_not_idempotent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, expected: str
) -> None:
    """SIGKILL of the run's owner (a ``flowledger start`` process) while the tool call is
    under way; the next owner adopts the run. A tool that is not read-only or idempotent
    is not called again (the run fails with tool_outcome_unknown, the ledger file
    untouched); a read-only one is called again and the run completes."""
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    work = tmp_path / "slow"
    work.mkdir()
    monkeypatch.setenv("SLOW_DIR", str(work))
    owner = subprocess.Popen(  # noqa: ASYNC220 - one child, killed below
        [
            sys.executable, "-m", "flowledger", "start", "slow_write", "1",
            "--input", json.dumps({"tool": tool, "text": "paid"}), "--db", db, *APP,
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        await asyncio.to_thread(wait_for, lambda: any(work.glob("started-*")), "the call")
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        await asyncio.to_thread(owner.wait, 60)
    (work / "release").touch()
    from .runs.app import catalog

    async with adopting(db, catalog()) as adopted:  # activation adopts the run
        assert await adopted.supervisor.wait_idle() is None
        [run] = (await adopted.registry.list(adopted.session_id)).runs
        tools = WorkflowTools.for_session(adopted)
        final = await tools.call("workflow_run_get", {"run_id": run.id})
    assert final["run_status"] == expected, final
    lines = (work / "lines").read_text().splitlines() if (work / "lines").exists() else []
    if expected == "failed":
        assert final["error"]["type"] == "ToolOutcomeUnknownError"
        assert "is not called again" in final["error"]["message"]
        assert lines == []  # the first call never finished, and no second call was made
    else:
        assert final["status_summary"] == "outcome done"
        assert len(list(work.glob("started-*"))) == 2  # called again after the crash


async def test_a_segment_keeps_one_session_per_source_and_a_resume_opens_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two calls before a pause share one server process (one MCP session for the
    segment); the pause closes it, and the call after the resume runs in a new one."""
    from .runs.app import slow_source

    work = tmp_path / "slow"
    work.mkdir()
    (work / "release").touch()
    monkeypatch.setenv("SLOW_DIR", str(work))
    count = {"kind": "tool", "dependency": "slow", "tool": "count_lines", "arguments": {}}
    validated = validate_artifact(
        {
            "format": "flowledger.artifact/v1",
            "name": "three_counts",
            "version": "1",
            "input_schema": {"type": "object", "additionalProperties": False},
            "output_schema": {"type": "object", "additionalProperties": False},
            "dependencies": {"slow": {"tools": ["count_lines"]}},
            "start": "first",
            "nodes": {
                "first": {**count, "next": "second"},
                "second": {**count, "next": "wait"},
                "wait": {
                    "kind": "interrupt",
                    "resume_schema": {"type": "object", "additionalProperties": False},
                    "next": "third",
                },
                "third": {**count, "next": "done"},
                "done": {"kind": "end", "outcome": "done"},
            },
        }
    )
    catalog = Catalog()
    catalog.register(compile_artifact(validated, sources={"slow": slow_source()}))
    async with session(f"sqlite:///{tmp_path / 's.db'}", catalog) as (built, tools):
        run_id = await start(tools, "three_counts", {})
        assert (await settle(built, tools, run_id))["run_status"] == "interrupted"
        done = await tools.call("workflow_run_resume", {"run_id": run_id, "resume": {}})
        assert done["run_status"] == "completed"
    calls = sorted(work.glob("started-*"), key=lambda path: path.stat().st_mtime_ns)
    processes = [path.name.split("-")[1] for path in calls]
    assert len(processes) == 3
    assert processes[0] == processes[1] != processes[2]


async def test_a_saved_artifact_compiles_with_the_children_it_pinned(
    tmp_path: Path, time_server: StdioSource, everything: StdioSource
) -> None:
    """Save the child, then the parent (which pins the child's digest); compile the saved
    closure; the run is the same as from the files, and its graph version is the closure
    digest the store recorded."""
    from flowledger.deploy import ArtifactStore, compile_saved

    url = f"sqlite:///{tmp_path / 'saved.db'}"
    runs = Path(__file__).parent / "runs"
    async with open_store(url) as store:
        artifacts = ArtifactStore.over(store)
        await artifacts.save(SESSION, (runs / "sign_off.yaml").read_text())
        record = await artifacts.save(SESSION, (runs / "digest.yaml").read_text())
        definition = await compile_saved(
            artifacts,
            SESSION,
            "daily_digest",
            "1",
            sources={"clock": time_server, "everything": everything},
        )
    assert definition.closure_digest == record.closure_digest
    assert definition.runner.graph_version.endswith(":" + record.closure_digest)
    catalog = Catalog()
    catalog.register(definition)
    async with session(url, catalog) as (built, tools):
        run_id = await start(tools, "daily_digest", {**DIGEST_INPUT, "review": False})
        await settle(built, tools, run_id)
        done = await tools.call("workflow_run_resume", {"run_id": run_id, "resume": {"go": True}})
    assert (done["run_status"], done["status_summary"]) == ("completed", "outcome unreviewed")
