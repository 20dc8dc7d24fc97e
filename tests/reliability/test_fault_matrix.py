"""Fault-injection matrix: every KV/Blobs/Ledger call that start, resume, cancel and
adoption make is, in turn, made to fail before commit, fail after commit (reply lost) or
stall; then the operation is recovered (a fresh supervisor is activated, and the
operation retried if it still has not happened) and the run must be consistent and reach
the state an undisturbed run reaches. Every injected fault is transient, so no run may end
failed.

``FLOWLEDGER_FAULT_MATRIX_POSTGRES=1`` adds PostgreSQL (a fresh schema per scenario).
``FLOWLEDGER_FULL_FAULT_MATRIX=1`` enumerates every call number; by default (and in CI)
the first six calls, every even-numbered call and the last one are disturbed, to stay well
under a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger.storage import Store, open_store
from flowledger.workflows.records.run import RunStatus
from tests.workflows.conftest import build_session

from .._postgres import postgres_url
from ._harness import Rig, check_consistent, runs_of
from .faults import Fault, FaultKind, faulty

OPERATIONS = ("start", "supervisor_start", "resume", "cancel", "adopt")
FULL = os.environ.get("FLOWLEDGER_FULL_FAULT_MATRIX") == "1"

# What an undisturbed operation ends with: (status, count, activity kinds).
EXPECTED: dict[str, tuple[RunStatus, int, list[str]]] = {
    "start": (
        RunStatus.COMPLETED,
        2,
        ["run_started", "vertex_completed", "vertex_completed", "run_completed"],
    ),
    "supervisor_start": (
        RunStatus.COMPLETED,
        2,
        ["run_started", "vertex_completed", "vertex_completed", "run_completed"],
    ),
    "adopt": (
        RunStatus.COMPLETED,
        2,
        ["run_started", "vertex_completed", "vertex_completed", "run_completed"],
    ),
    "resume": (
        RunStatus.COMPLETED,
        5,
        ["run_started", "run_interrupted", "run_resumed", "vertex_completed", "run_completed"],
    ),
    "cancel": (RunStatus.CANCELLED, 0, ["run_started", "run_interrupted", "run_cancelled"]),
}
# Every injected fault is transient and ambiguous, so no run may end failed (DESIGN:
# "ambiguous storage errors never fail a run").


BACKENDS = ["memory", "sqlite"]
if os.environ.get("FLOWLEDGER_FAULT_MATRIX_POSTGRES") == "1":
    BACKENDS.append("postgres")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextlib.asynccontextmanager
async def fresh_store(backend: str, directory: Path, label: str) -> Any:
    """A fresh store: memory, a new SQLite file, or a new PostgreSQL schema."""
    with contextlib.ExitStack() as stack:
        if backend == "memory":
            url = "memory://"
        elif backend == "sqlite":
            url = f"sqlite:///{directory / label}.db"
        else:
            url = stack.enter_context(postgres_url())
        async with open_store(url) as store:
            yield store


@dataclass
class Outcome:
    calls: list[str]
    fired: list[str]
    error: str


async def prepare(rig: Rig, operation: str) -> str | None:
    """Set up (faults disarmed) what ``operation`` acts on; return its run id."""
    if operation == "start":
        return None
    if operation in ("adopt", "supervisor_start"):
        run = await rig.session.create_run("counter")  # pending; nobody starts it yet
        return run.id
    result = await rig.tools.call(
        "workflow_run_start",
        {"definition_name": "asker", "definition_version": "v1", "input": {"count": 0}},
    )
    await rig.settle()
    run = await rig.session.registry.get(rig.session.session_id, result["run_id"])
    assert run.status is RunStatus.INTERRUPTED
    return run.id


async def perform(rig: Rig, operation: str, run_id: str | None) -> None:
    if operation == "start":
        await rig.tools.call(
            "workflow_run_start",
            {"definition_name": "counter", "definition_version": "v1", "input": {"count": 0}},
        )
    elif operation == "supervisor_start":
        assert run_id is not None
        await (await rig.supervisor.start(run_id)).wait()
    elif operation == "resume":
        assert run_id is not None
        await rig.supervisor.resume(run_id, b'{"increment":5}')
    elif operation == "cancel":
        assert run_id is not None
        await rig.supervisor.cancel(run_id, "stop")
    await rig.settle()


async def scenario(store: Store, operation: str, fault: Fault | None) -> Outcome:
    """Run ``operation`` once with ``fault`` armed, recover, and check the result."""
    if operation == "adopt":
        # The run is created by a front door; the supervisor that adopts it is activated
        # with the fault armed.
        setup = await Rig.open(store)
        run_id = await prepare(setup, operation)
        await setup.supervisor.shutdown()
        wrapped, faults = faulty(store)
        session = build_session(wrapped, setup.session.session_id)
        supervisor = session.supervisor(shutdown_timeout=2.0)
        faults.arm(fault)
        error = ""
        try:
            async with asyncio.timeout(60):  # only catches a hang
                await supervisor.activate()
                await supervisor.wait_idle()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        faults.disarm()
        with contextlib.suppress(Exception):
            await supervisor.shutdown()
        outcome = Outcome(list(faults.calls), list(faults.fired), error)
        rig = await Rig.open(store, setup.session.session_id)
    else:
        rig = await Rig.open(store)
        run_id = await prepare(rig, operation)
        rig.faults.arm(fault)
        error = ""
        try:
            async with asyncio.timeout(60):  # only catches a hang
                await perform(rig, operation, run_id)
        except Exception as exc:  # ToolError, AdoptionError, InjectedFault, ...
            error = f"{type(exc).__name__}: {exc}"
        outcome = Outcome(list(rig.faults.calls), list(rig.faults.fired), error)
        rig = await rig.restart()
    try:
        await recover_and_check(rig, operation, run_id)
    finally:
        await rig.stop()
    return outcome


async def recover_and_check(rig: Rig, operation: str, run_id: str | None) -> None:
    await rig.settle()
    session = rig.session
    runs = await runs_of(session)
    if operation == "start":
        # A client whose start call failed retries it; every run it created must finish.
        if not any(r.status is RunStatus.COMPLETED for r in runs):
            await perform(rig, "start", None)
            runs = await runs_of(session)
    else:
        assert run_id is not None
        run = await session.registry.get(session.session_id, run_id)
        if operation == "resume" and run.status is RunStatus.INTERRUPTED:
            await perform(rig, "resume", run_id)
        elif operation == "cancel" and not run.status.terminal:
            await perform(rig, "cancel", run_id)
        runs = [await session.registry.get(session.session_id, run_id)]
    status, count, kinds = EXPECTED[operation]
    assert runs, "no run survived"
    for run in runs:
        state = await check_consistent(session, run)
        assert run.status is status, (run.status, run.status_summary)
        assert state.get("count") == count
        assert await session.kinds(run.id) == kinds
        assert run.activity_cursor == len(await session.checkpoints.history(run.graph_run_id))


def chosen(total: int) -> Iterator[int]:
    if FULL:
        yield from range(1, total + 1)
        return
    for k in range(1, total + 1):
        if k <= 6 or k % 2 == 0 or k == total:
            yield k


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_fault_matrix(backend: str, operation: str, tmp_path: Path) -> None:
    """Every fault kind at every (chosen) call number of ``operation`` recovers to the
    undisturbed outcome, consistently; a stall changes nothing at all."""
    async with fresh_store(backend, tmp_path, "baseline") as store:
        baseline = await scenario(store, operation, None)
    assert baseline.error == ""
    assert baseline.calls, "the undisturbed operation made no storage calls"
    failures: list[str] = []
    unfired = 0
    for k in chosen(len(baseline.calls)):
        for kind in FaultKind:
            fault = Fault(kind, k)
            async with fresh_store(backend, tmp_path, f"{kind}-{k}") as store:
                try:
                    outcome = await scenario(store, operation, fault)
                except AssertionError as exc:
                    failures.append(f"{kind}@{k} ({baseline.calls[k - 1]}): {exc}")
                    continue
            unfired += not outcome.fired
            if kind is FaultKind.DELAY and outcome.error:
                failures.append(f"delay@{k}: {outcome.error}")
    assert not failures, "\n".join(failures)
    assert unfired <= len(baseline.calls) // 10, f"{unfired} faults never fired"


@pytest.mark.parametrize("kind", [FaultKind.BEFORE, FaultKind.AFTER])
async def test_seed_append_failure_does_not_fail_the_run(
    backend: str, kind: FaultKind, tmp_path: Path
) -> None:
    """A transient storage error at the seed is ambiguous, never definite: after recovery the
    run completes (DESIGN: "ambiguous storage errors never fail a run"). BEFORE: the seed
    append itself fails; AFTER: the pending -> running write commits but its reply is lost."""
    async with fresh_store(backend, tmp_path, "seed") as store:
        baseline = await scenario(store, "adopt", None)
    seed = next(
        i + 1 for i, call in enumerate(baseline.calls) if call.startswith("ledger.append flow/")
    )
    if kind is FaultKind.AFTER:
        seed = max(i + 1 for i, c in enumerate(baseline.calls[:seed]) if c.startswith("kv.put"))
    async with fresh_store(backend, tmp_path, "faulty") as store:
        setup = await Rig.open(store)
        run = await setup.session.create_run("counter")
        await setup.supervisor.shutdown()
        wrapped, faults = faulty(store)
        session = build_session(wrapped, setup.session.session_id)
        supervisor = session.supervisor(shutdown_timeout=2.0)
        faults.arm(Fault(kind, seed))
        await supervisor.activate()
        await supervisor.wait_idle()
        faults.disarm()
        await supervisor.shutdown()
        rig = await Rig.open(store, setup.session.session_id)
        try:
            await rig.settle()
            after = await rig.session.registry.get(rig.session.session_id, run.id)
            assert after.status is RunStatus.COMPLETED, after.status_summary
        finally:
            await rig.stop()
