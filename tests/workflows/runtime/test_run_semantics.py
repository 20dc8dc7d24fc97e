"""Run semantics through the Python API (the tool bundle over a real SQLite session):
a run stays on the graph it started with, errored pauses say so and are retried without a
payload, ``on_error="fail"`` fails instead of pausing, and what a paused run waits for is
readable without its definition."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.host import open_session
from flowledger.tools import ToolError, WorkflowTools
from flowledger.workflows import Catalog, ResumeBlockedError
from flowledger.workflows.runtime.resumption import prepare_resume
from flowledger.workflows.runtime.session import WorkflowSession

from .. import semantics_app

SENTINEL = "upstream-sentinel-7d41"


def tools_for(session: WorkflowSession) -> WorkflowTools:
    return WorkflowTools.for_session(session)


@asynccontextmanager
async def owner(url: str, catalog: Catalog) -> AsyncIterator[tuple[WorkflowSession, WorkflowTools]]:
    async with open_session(url, catalog) as session:
        yield session, tools_for(session)


async def settled(session: WorkflowSession, tools: WorkflowTools, run_id: str) -> dict[str, Any]:
    await session.supervisor.wait_idle()
    return await tools.call("workflow_run_get", {"run_id": run_id})


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'semantics.db'}"


@pytest.fixture
def flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "upstream-is-back"
    monkeypatch.setenv("SEMANTICS_FLAG", str(path))
    yield path


def catalog(monkeypatch: pytest.MonkeyPatch, *, changed: bool) -> Catalog:
    if changed:
        monkeypatch.setenv("SEMANTICS_GRAPH", "changed")
    else:
        monkeypatch.delenv("SEMANTICS_GRAPH", raising=False)
    return semantics_app.catalog()


async def start(tools: WorkflowTools, name: str, version: str, document: Any) -> str:
    started = await tools.call(
        "workflow_run_start",
        {"definition_name": name, "definition_version": version, "input": document},
    )
    return str(started["run_id"])


# -- 1. a run stays on the graph it started with ------------------------------------------------


async def test_a_changed_graph_blocks_the_resume_and_never_fails_the_run(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: resuming after the graph changed under the same definition version used
    to fail the run for good ("workflow checkpoint unavailable"). Now the run stays
    interrupted, readiness is blocked with a diagnostic naming both graph versions, nothing
    is written, and registering the old graph again lets it finish."""
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "ask", "v1", {"text": "hello"})
        paused = await settled(session, tools, run_id)
    assert paused["run_status"] == "interrupted"
    assert paused["resume_readiness"] == {"status": "ready"}

    async with owner(url, catalog(monkeypatch, changed=True)) as (session, tools):
        before = await tools.call("workflow_run_get", {"run_id": run_id})
        assert before["run_status"] == "interrupted"
        readiness = before["resume_readiness"]
        assert readiness["status"] == "blocked"
        [diagnostic] = readiness["diagnostics"]
        assert diagnostic["code"] == "graph_changed"
        assert "ask@v1" in diagnostic["message"] and "topology" in diagnostic["message"]
        assert "register the graph this run started with" in diagnostic["hint"]
        with pytest.raises(ToolError) as refused:
            await tools.call(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
        assert "is blocked: graph_changed" in str(refused.value)
        run = await session.registry.get(session.session_id, run_id)
        with pytest.raises(ResumeBlockedError):  # the supervisor refuses it on its own too
            await session.supervisor.resume(run_id, b'{"approved":true}')
        after = await tools.call("workflow_run_get", {"run_id": run_id})
        assert after == before  # nothing written: same status, revision, cursor, times
        assert (await session.registry.get(session.session_id, run_id)).revision == run.revision
        definition = session.catalog.resolve("ask", "v1")
        assert len(await definition.history(run.graph_run_id)) == run.checkpoint_revision + 1

    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        resumed = await tools.call(
            "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
        )
        assert resumed["run_status"] == "completed"


async def test_old_runs_finish_on_v1_while_new_runs_start_on_v2(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migration path: keep the old graph registered as v1 and register the changed
    graph as v2 in the same catalog; paused v1 runs resume on v1, new runs use v2."""
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        old = await start(tools, "ask", "v1", {"text": "old"})
        new = await start(tools, "ask", "v2", {"text": "new"})
        await session.supervisor.wait_idle()
        for run_id in (old, new):
            got = await tools.call("workflow_run_get", {"run_id": run_id})
            assert got["resume_readiness"] == {"status": "ready"}
            done = await tools.call(
                "workflow_run_resume", {"run_id": run_id, "resume": {"approved": True}}
            )
            assert done["run_status"] == "completed"
        runs = {r.id: r for r in (await session.registry.list(session.session_id)).runs}
        states = {
            run_id: (
                await session.catalog.resolve("ask", runs[run_id].definition_version).get(
                    runs[run_id].graph_run_id
                )
            ).state
            for run_id in (old, new)
        }
    assert states[old]["audited"] is False and states[old]["published"] is True
    assert states[new]["audited"] is True and states[new]["published"] is True


async def test_adopting_a_running_run_with_a_changed_graph_leaves_it_running(
    url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Regression: an owner adopting a run left running (its owner stopped mid-step) under a
    changed graph used to fail it. Now it stays running with a summary saying why; an owner
    with the run's own graph continues it."""
    hold = tmp_path / "release-draft"
    monkeypatch.setenv("SEMANTICS_HOLD", str(hold))
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "ask", "v1", {"text": "crash"})
    # The owner stopped while draft ran: the run is running at its seed checkpoint.
    async with owner(url, catalog(monkeypatch, changed=True)) as (session, tools):
        await session.supervisor.wait_idle()
        got = await tools.call("workflow_run_get", {"run_id": run_id})
    assert got["run_status"] == "running"
    assert got["status_summary"].startswith("workflow adoption blocked: the graph of ask@v1")
    assert got["resume_readiness"] == {"status": "not_applicable"}
    hold.touch()
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        got = await settled(session, tools, run_id)
    assert got["run_status"] == "interrupted"
    assert got["pending"]["vertex_id"] == "approve"


# -- 3. an errored pause says that it is an error ----------------------------------------------


async def test_an_errored_pause_shows_the_error_and_is_retried_without_a_payload(
    url: str, monkeypatch: pytest.MonkeyPatch, flag: Path
) -> None:
    """Regression: a task that raised paused the run like a question, with its error
    nowhere, and a retry needed a payload. Now the pause has kind error with the exception's
    type and message (to the owner only, never in history), a payload is refused, and a
    resume without one retries the vertex."""
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "flaky", "v1", {"source": SENTINEL})
        got = await settled(session, tools, run_id)
        assert got["run_status"] == "interrupted"
        pending = got["pending"]
        assert pending["kind"] == "error"
        assert pending["vertex_id"] == "fetch" and pending["vertex_label"] == "Fetch the source"
        assert pending["error"] == {
            "type": "ConnectionError",
            "message": f"upstream {SENTINEL} unavailable",
        }
        assert "resume_schema" not in pending and "info" not in pending
        history = await tools.call("workflow_run_history", {"run_id": run_id})
        assert SENTINEL not in json.dumps(history) and "ConnectionError" not in json.dumps(history)
        with pytest.raises(ToolError) as refused:
            await tools.call("workflow_run_resume", {"run_id": run_id, "resume": {"x": 1}})
        assert "takes no payload" in str(refused.value)
        still = await tools.call("workflow_run_get", {"run_id": run_id})
        assert still["checkpoint_revision"] == got["checkpoint_revision"]
        flag.touch()  # noqa: ASYNC240 - the upstream comes back
        done = await tools.call("workflow_run_resume", {"run_id": run_id})
        assert done["run_status"] == "completed"
        assert "pending" not in done


async def test_a_request_pause_needs_a_payload(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "ask", "v1", {"text": "hi"})
        got = await settled(session, tools, run_id)
        assert got["pending"]["kind"] == "request"
        with pytest.raises(ToolError) as refused:
            await tools.call("workflow_run_resume", {"run_id": run_id})
        assert "waits for a payload" in str(refused.value)
        run = await session.registry.get(session.session_id, run_id)
        with pytest.raises(Exception, match="waits for a payload"):
            await prepare_resume(session.catalog.resolve("ask", "v1"), run, None)


async def test_on_error_fail_fails_the_run_and_keeps_the_error(
    url: str, monkeypatch: pytest.MonkeyPatch, flag: Path
) -> None:
    """``on_error="fail"``: a task error makes the run failed (never an implicit pause);
    the summary says which vertex raised which type of error, workflow_run_get's error
    also what it said; history and the summary never carry the message (it echoes the
    input here, as a tool's error text can)."""
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "strict", "v1", {"source": SENTINEL})
        got = await settled(session, tools, run_id)
        assert got["run_status"] == "failed"
        assert got["status_summary"] == "workflow failed: Fetch the source: ConnectionError"
        listed = await tools.call("workflow_run_list", {})
        assert SENTINEL not in json.dumps(listed)
        assert got["error"] == {
            "type": "ConnectionError",
            "message": f"upstream {SENTINEL} unavailable",
        }
        assert got["resume_readiness"] == {"status": "not_applicable"}
        assert "pending" not in got
        kinds = [
            e["kind"]
            for e in (await tools.call("workflow_run_history", {"run_id": run_id}))["entries"]
        ]
        assert kinds[-1] == "run_failed" and "run_interrupted" not in kinds
        history = await tools.call("workflow_run_history", {"run_id": run_id})
        assert SENTINEL not in json.dumps(history)
        definitions = await tools.call("workflow_definition_list", {})
        policies = {(d["name"], d["on_error"]) for d in definitions["definitions"]}
        assert ("strict", "fail") in policies and ("flaky", "pause") in policies


# -- 4. what a paused run waits for is visible to a model ---------------------------------------


async def test_pending_shows_the_question_and_the_resume_schema(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "ask", "v1", {"text": "hello"})
        got = await settled(session, tools, run_id)
        listed = await tools.call("workflow_definition_list", {})
    assert got["pending"] == {
        "kind": "request",
        "checkpoint_revision": got["checkpoint_revision"],
        "vertices": [
            {
                "kind": "request",
                "vertex_id": "approve",
                "vertex_label": "Approve the text",
                "info": {"question": "publish 'hello'?", "words": 5},
            }
        ],
        "vertex_id": "approve",
        "vertex_label": "Approve the text",
        "info": {"question": "publish 'hello'?", "words": 5},
        "resume_schema": semantics_app.ASK_RESUME,
    }
    ask = next(d for d in listed["definitions"] if (d["name"], d["version"]) == ("ask", "v1"))
    assert ask["input_schema"] == semantics_app.ASK_INPUT
    assert ask["resume_schema"] == semantics_app.ASK_RESUME
    # Readers without the definition loaded still see it (the default catalog lacks "ask").
    async with open_session(url, Catalog(), activate=False) as reader:
        bare = await tools_for(reader).call("workflow_run_get", {"run_id": run_id})
    assert bare["pending"] == got["pending"]
    assert bare["resume_readiness"]["status"] == "blocked"
    assert bare["resume_readiness"]["diagnostics"][0]["code"] == "definition_missing"


async def test_large_interrupt_info_is_truncated_with_a_marker(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with owner(url, catalog(monkeypatch, changed=False)) as (session, tools):
        run_id = await start(tools, "ask", "v1", {"text": "x" * 10_000})
        got = await settled(session, tools, run_id)
    pending = got["pending"]
    assert pending["info_truncated"] is True
    assert isinstance(pending["info"], str)
    assert len(pending["info"].encode()) <= 4096
    assert pending["info"].startswith('{"question":"publish')


def test_flow_keeps_the_error_type_of_an_errored_pause() -> None:
    """The checkpoint stores the exception's class name beside its message."""
    import asyncio

    graph: flow.Graph[dict[str, Any]] = flow.Graph("boom", state=dict)

    @graph.vertex("explode")
    async def explode(state: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("missing")

    runner = graph.compile(entry="explode", finish="explode")

    async def main() -> None:
        paused = await runner.run({})
        again = await runner.get(paused.run.graph_run_id)
        assert again.interrupts is not None
        cause = again.interrupts[0].cause
        assert isinstance(cause, flow.StoredError) and cause.type_name == "KeyError"

    asyncio.run(main())
