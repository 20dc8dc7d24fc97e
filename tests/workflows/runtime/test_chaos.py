"""Chaos: three ``flowledger worker`` processes on PostgreSQL, SIGKILLed at random.

50 runs over 10 sessions are started through front doors (this process never owns a
session); 20 of them pause for an approval, which this process gives (or, for 5 of them,
refuses by cancelling) through the front door too. Meanwhile a random worker is
SIGKILLed every few seconds and replaced. At the end:

* every run is in its expected terminal state (and its final state says so);
* every run's checkpoint revisions are contiguous 0..n;
* no vertex ran again in a step once its DONE record was durable: for every (run, step,
  vertex) there is one DONE vertex run id in the whole history, that execution started
  exactly once (the tasks log each start, see ``chaos_app``), and every other execution
  of the same step and vertex started before that DONE checkpoint was appended;
* no activity is duplicated in any run's journal (unique event ids);
* after each kill, every session the dead worker owned with a run in flight was adopted:
  it saw new progress of such a run (a checkpoint append or a run record write), within
  a deadline that only catches an orphan nobody adopts. How fast adoption is, is
  latency, not correctness: ``bench/adoption.py`` measures it (p50/p99 over many kills)
  and docs/deployment.md reports it.

Append, record-write and lease times come from triggers this test installs on the
store's tables (the database's clock, which is this machine's clock). PostgreSQL only:
skipped when unreachable, failing when ``CI=true``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from flowledger.flow import VertexStatus
from flowledger.storage import open_store
from flowledger.tools import ToolError, WorkflowTools
from flowledger.workflows.activities.journal import journal_name
from flowledger.workflows.runtime.frontdoor import FrontDoor
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.runtime.worker import read_workers

from ..._postgres import base_url, postgres_url
from .. import chaos_app

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
TTL = 1.0
POLL = 0.2
WORKERS = 3
SESSIONS = 10
CHAINS = 3  # per session
APPROVALS = 2  # per session; the second one of every even session is cancelled
KILLS = 5
START_GAP = (0.1, 0.3)  # seconds between run starts
KILL_GAP = (2.0, 3.0)  # seconds between kills
FINISH_DEADLINE = 60.0
#: Only catches a session nobody adopts (the whole test would end in FINISH_DEADLINE).
ADOPTION_DEADLINE = 30.0
START_SLACK = 0.05  # seconds: the append trigger fires just before the commit


@dataclass
class Planned:
    session_id: str
    definition: str
    outcome: str  # "completed" or "cancelled"
    action: str = ""  # approvals: "resume" or "cancel"
    run_id: str = ""
    graph_run_id: str = ""
    acted: bool = False
    error: str = ""


@dataclass
class Kill:
    pid: int
    at: float
    sessions: tuple[str, ...]
    in_flight: list[Planned] = field(default_factory=list)


def _schema(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


def _admin(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(base_url(), autocommit=True) as conn:
        cursor = conn.execute(query, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def _instrument(schema: str) -> None:
    """Triggers that note, with the database's clock, every ledger append, KV write and
    lease grant (the store's own tables are untouched otherwise)."""
    s = f'"{schema}"'
    _admin(
        f"""
        CREATE TABLE {s}.chaos_appends (log_id bigint, seq bigint, at double precision);
        CREATE TABLE {s}.chaos_kv (key text, revision bigint, at double precision);
        CREATE TABLE {s}.chaos_leases (name text, epoch bigint, at double precision);
        CREATE FUNCTION {s}.chaos_append() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.chaos_appends
            VALUES (NEW.log_id, NEW.seq, extract(epoch FROM clock_timestamp()));
            RETURN NEW;
        END $$;
        CREATE FUNCTION {s}.chaos_kv_write() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.chaos_kv
            VALUES (NEW.key, NEW.revision, extract(epoch FROM clock_timestamp()));
            RETURN NEW;
        END $$;
        CREATE FUNCTION {s}.chaos_lease() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' OR OLD.epoch <> NEW.epoch THEN
                INSERT INTO {s}.chaos_leases
                VALUES (NEW.name, NEW.epoch, extract(epoch FROM clock_timestamp()));
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER chaos_append AFTER INSERT ON {s}.ledger_records
            FOR EACH ROW EXECUTE FUNCTION {s}.chaos_append();
        CREATE TRIGGER chaos_kv_write AFTER INSERT OR UPDATE ON {s}.kv
            FOR EACH ROW EXECUTE FUNCTION {s}.chaos_kv_write();
        CREATE TRIGGER chaos_lease AFTER INSERT OR UPDATE ON {s}.leases
            FOR EACH ROW EXECUTE FUNCTION {s}.chaos_lease();
        """
    )


class Fleet:
    """The worker processes."""

    def __init__(self, url: str, logs: Path) -> None:
        self.url = url
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ,
            chaos_app.LOG_ENV: str(logs),
            chaos_app.SLEEP_ENV: "0.05,0.35",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }

    def spawn(self) -> subprocess.Popen[bytes]:
        index = len(self.procs)
        with open(self.logs / f"worker-{index}.log", "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "flowledger",
                    "worker",
                    "--db",
                    self.url,
                    "--app",
                    "tests.workflows.chaos_app:catalog",
                    "--lease-ttl",
                    str(TTL),
                    "--poll",
                    str(POLL),
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def stop(self) -> list[int | None]:
        """SIGTERM every live worker; return their exit codes (None if one hung)."""
        live = self.alive()
        for proc in live:
            proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in live:
            try:
                codes.append(proc.wait(timeout=15))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(None)
        return codes

    def kill_all(self) -> None:
        for proc in self.alive():
            proc.kill()
            proc.wait()

    def output(self) -> str:
        parts = []
        for path in sorted(self.logs.glob("worker-*.log")):
            text = path.read_text(errors="replace")
            parts.append(f"--- {path.name}\n{text[-3000:]}")
        return "\n".join(parts)


def _plan() -> list[Planned]:
    plan: list[Planned] = []
    for index in range(SESSIONS):
        session_id = str(uuid.uuid4())
        for _ in range(CHAINS):
            plan.append(Planned(session_id, "chaos_chain", "completed"))
        for number in range(APPROVALS):
            cancel = number == 1 and index % 2 == 0
            plan.append(
                Planned(
                    session_id,
                    "chaos_approval",
                    "cancelled" if cancel else "completed",
                    action="cancel" if cancel else "resume",
                )
            )
    random.shuffle(plan)
    return plan


async def test_runs_survive_killed_workers(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with postgres_url() as url:
        async with open_store(url) as store:  # creates the schema and its tables
            _instrument(_schema(url))
            fleet = Fleet(url, logs)
            try:
                await _chaos(store, fleet, _schema(url))
            except BaseException:
                print(fleet.output())
                raise
            finally:
                fleet.kill_all()


async def _chaos(store: Any, fleet: Fleet, schema: str) -> None:
    catalog = chaos_app.catalog()
    plan = _plan()
    tools: dict[str, WorkflowTools] = {}
    sessions: dict[str, WorkflowSession] = {}
    for item in plan:
        if item.session_id in tools:
            continue
        session = WorkflowSession.build(store, item.session_id, catalog)
        door = FrontDoor.for_session(session, start_timeout=30, request_timeout=30)
        sessions[item.session_id] = session
        tools[item.session_id] = WorkflowTools(
            item.session_id,
            catalog=session.catalog,
            registry=session.registry,
            inputs=session.inputs,
            supervisor=door,
            start_timeout=40,
        )
    for _ in range(WORKERS):
        fleet.spawn()
    up_by = time.monotonic() + 30
    while len(await read_workers(store)) < WORKERS:  # each writes its record when it is up
        assert time.monotonic() < up_by, "the workers did not start"
        await asyncio.sleep(0.1)

    started = time.monotonic()
    kills: list[Kill] = []
    failures: list[str] = []

    async def start_all() -> None:
        gate = asyncio.Semaphore(6)

        async def start(item: Planned, label: int) -> None:
            async with gate:
                try:
                    result = await tools[item.session_id].call(
                        "workflow_run_start",
                        {
                            "definition_name": item.definition,
                            "definition_version": "v1",
                            "input": {"label": f"run-{label}"},
                        },
                    )
                except ToolError as exc:
                    failures.append(f"start {item.definition}: {exc}")
                    return
                item.run_id = str(result["run_id"])
                run = await sessions[item.session_id].registry.get(item.session_id, item.run_id)
                item.graph_run_id = run.graph_run_id

        pending = []
        for label, item in enumerate(plan):
            pending.append(asyncio.ensure_future(start(item, label)))
            await asyncio.sleep(random.uniform(*START_GAP))
        await asyncio.gather(*pending)

    async def act(item: Planned) -> None:
        call = tools[item.session_id].call
        try:
            if item.action == "resume":
                result = await call(
                    "workflow_run_resume", {"run_id": item.run_id, "resume": {"approved": True}}
                )
            else:
                result = await call(
                    "workflow_run_cancel", {"run_id": item.run_id, "reason": "chaos says no"}
                )
        except ToolError as exc:
            item.error = str(exc)
            failures.append(f"{item.action} {item.run_id}: {exc}")
            return
        if item.action == "cancel" and result["run_status"] != "cancelled":
            failures.append(f"cancel {item.run_id} returned {result['run_status']}")

    async def answer_approvals() -> None:
        actions: list[asyncio.Future[None]] = []
        while True:
            waiting = [p for p in plan if p.action and p.run_id and not p.acted]
            if not waiting and started_all.done():
                break
            for item in waiting:
                run = await sessions[item.session_id].registry.get(item.session_id, item.run_id)
                if run.status == "interrupted" and random.random() < 0.5:
                    item.acted = True
                    actions.append(asyncio.ensure_future(act(item)))
            await asyncio.sleep(0.3)
        await asyncio.gather(*actions)

    async def kill_some() -> None:
        await asyncio.sleep(1.5)
        for _ in range(KILLS):
            records = {r.pid: r for r in await read_workers(store)}
            alive = fleet.alive()
            owners = [p for p in alive if p.pid in records and records[p.pid].sessions]
            victim = random.choice(owners or alive)  # a kill that orphans nothing tells little
            record = records.get(victim.pid)
            owned = record.sessions if record is not None else ()
            in_flight = []
            for item in plan:
                if item.session_id in owned and item.run_id:
                    run = await sessions[item.session_id].registry.get(item.session_id, item.run_id)
                    if run.status in ("pending", "running"):
                        in_flight.append(item)
            victim.send_signal(signal.SIGKILL)
            kills.append(Kill(victim.pid, time.time(), owned, in_flight))
            victim.wait()
            fleet.spawn()
            await asyncio.sleep(random.uniform(*KILL_GAP))

    started_all = asyncio.ensure_future(start_all())
    await asyncio.gather(started_all, kill_some(), answer_approvals())
    assert not failures, failures

    # Every run reaches its expected terminal state.
    deadline = time.monotonic() + FINISH_DEADLINE
    while True:
        statuses = {}
        for item in plan:
            run = await sessions[item.session_id].registry.get(item.session_id, item.run_id)
            statuses[item.run_id] = str(run.status)
        if all(s in ("completed", "cancelled", "failed") for s in statuses.values()):
            break
        assert time.monotonic() < deadline, f"runs not finished: {statuses}"
        await asyncio.sleep(0.2)
    elapsed = time.monotonic() - started
    # The worker spawned after the last kill may still be starting: one stopped before it
    # has installed its signal handlers dies of the SIGTERM instead of draining.
    up_by = time.monotonic() + 30
    while {p.pid for p in fleet.alive()} - {r.pid for r in await read_workers(store)}:
        assert time.monotonic() < up_by, "a respawned worker did not start"
        await asyncio.sleep(0.1)
    codes = fleet.stop()
    assert codes == [0] * len(codes), f"workers did not stop cleanly: {codes}"
    wrong = {
        p.run_id: (p.outcome, statuses[p.run_id]) for p in plan if statuses[p.run_id] != p.outcome
    }
    assert not wrong, f"unexpected outcomes (expected, actual): {wrong}"
    assert len(kills) == KILLS

    await _check_histories(sessions, plan)
    _check_tasks(schema, fleet.logs)
    await _check_journals(store, plan)
    _check_adoption(schema, kills)
    print(f"chaos: {len(plan)} runs, {len(kills)} kills, {elapsed:.1f} s")


# -- checks ------------------------------------------------------------------------------


_DONE_FIRST: dict[tuple[str, int, str], int] = {}  # (graph run, step, vertex) -> revision
_DONE_RUN: dict[tuple[str, int, str], str] = {}  # -> the DONE vertex run id


async def _check_histories(sessions: dict[str, WorkflowSession], plan: list[Planned]) -> None:
    _DONE_FIRST.clear()
    _DONE_RUN.clear()
    for item in plan:
        history = await sessions[item.session_id].checkpoints.history(item.graph_run_id)
        revisions = [cp.revision for cp in history]
        assert revisions == list(range(len(history))), f"{item.run_id}: gaps {revisions}"
        final = history[-1].run.status.name.lower()
        assert final == item.outcome, f"{item.run_id}: checkpoint says {final}"
        if item.outcome == "completed":
            state = history[-1].state or {}
            expected = 5 if item.definition == "chaos_chain" else 3  # one per vertex
            assert state.get("count") == expected, f"{item.run_id}: state {state}"
        done: dict[tuple[str, int, str], set[str]] = defaultdict(set)
        for cp in history:
            for vertex in cp.vertices:
                if vertex.status is VertexStatus.DONE:
                    key = (item.graph_run_id, vertex.step, vertex.vertex)
                    done[key].add(vertex.vertex_run_id)
                    _DONE_FIRST.setdefault(key, cp.revision)
        for key, run_ids in done.items():
            assert len(run_ids) == 1, f"{key} reached DONE in {len(run_ids)} executions"
            _DONE_RUN[key] = next(iter(run_ids))


def _appends(schema: str) -> dict[tuple[str, int], float]:
    """(ledger log name, seq) -> when the record was inserted."""
    rows = _admin(
        f'SELECT l.name, a.seq, a.at FROM "{schema}".chaos_appends a '
        f'JOIN "{schema}".ledger_logs l ON l.id = a.log_id'
    )
    return {(name, seq): at for name, seq, at in rows}


def _check_tasks(schema: str, logs: Path) -> None:
    starts: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for path in logs.glob("tasks-*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                starts[(entry["graph_run_id"], entry["step"], entry["vertex"])].append(entry)
    appended = _appends(schema)
    for key, done_run in _DONE_RUN.items():
        graph_run_id = key[0]
        executions = starts.get(key, [])
        mine = [e for e in executions if e["vertex_run_id"] == done_run]
        assert len(mine) == 1, f"{key}: the DONE execution started {len(mine)} times"
        durable_at = appended[(f"flow/runs/{graph_run_id}", _DONE_FIRST[key] + 1)]
        late = [e for e in executions if e["vertex_run_id"] != done_run]
        late = [e for e in late if e["t"] > durable_at + START_SLACK]
        assert not late, f"{key} ran again after its DONE checkpoint: {late}"


async def _check_journals(store: Any, plan: list[Planned]) -> None:
    for item in plan:
        name = journal_name(item.session_id, item.run_id)
        seen: set[str] = set()
        after = 0
        while True:
            records = await store.ledger.read(name, after=after, limit=100)
            if not records:
                break
            for record in records:
                event_id = json.loads(record.payload)["activity"]["event_id"]
                assert event_id not in seen, f"{item.run_id}: duplicate activity {event_id}"
                seen.add(event_id)
            after = records[-1].seq
        assert seen, f"{item.run_id}: no activities"


def _check_adoption(schema: str, kills: list[Kill]) -> None:
    appended = _appends(schema)
    writes = _admin(f'SELECT key, at FROM "{schema}".chaos_kv')
    measured = 0
    worst = 0.0
    for kill in kills:
        by_session: dict[str, list[float]] = defaultdict(list)
        for item in kill.in_flight:
            log = f"flow/runs/{item.graph_run_id}"
            key = f"sessions/{item.session_id}/workflows/runs/{item.run_id}"
            times = [at for (name, _), at in appended.items() if name == log and at > kill.at]
            times += [at for k, at in writes if k == key and at > kill.at]
            if times:
                by_session[item.session_id].append(min(times))
        for session_id, firsts in by_session.items():
            latency = min(firsts) - kill.at
            measured += 1
            worst = max(worst, latency)
            assert latency <= ADOPTION_DEADLINE, (
                f"session {session_id}: no progress for {latency:.2f} s after the kill of "
                f"worker {kill.pid}: nobody adopted it"
            )
    print(f"adoption: {measured} orphaned sessions, worst first progress {worst:.2f} s")
    assert measured > 0, "no kill orphaned a run in flight: the test checked nothing"
