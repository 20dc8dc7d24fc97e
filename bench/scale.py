"""Workload h): does an operation cost the same on a database of 100,000 runs as on an empty one?

Builds two databases per backend (SQLite, and PostgreSQL with ``--postgres URL``):

* empty - the definitions' template runs (two finished ``loop`` runs, below) and one long
  run of --long-revisions revisions, executed for real;
* full  - the same, plus --runs finished runs holding --checkpoints checkpoints in total.

and measures the same operations on each, --repeat times after two warm-up calls: the
median with min-max and the p99 of the wall time, and the ratio full / empty.

The many runs come from a generator, because executing 100,000 runs through the engine
takes about 15 minutes (9 ms each on SQLite). It writes what the public API writes: two
``loop`` runs (goals 3 and 4: 9 and 11 checkpoints, so 10 on average) are executed for
real through ``workflow_run_start``, and every generated run is a copy of one of them:

* its run record is the template's final record (status completed) with fresh IDs and
  a ``created_at`` one second apart (the oldest first, all before the templates), stored
  with `RunRegistry.create` (which writes its run-order index entries);
* its checkpoint log is the template's records with the template's UUIDs replaced by
  fresh ones (the graph run ID by the record's), appended in one `Ledger.append` with the
  template's attachments (states are content addressed, so they are shared);
* its activity journal is the template's records with the run ID replaced and each
  event ID recomputed (`activity.event_id`, the projector's own function), appended in
  one `Ledger.append`.

So a generated run differs from an executed one only in its IDs, its record's times and
KV revision (1, where an executed run's record was rewritten 4 times), and in that its
checkpoints and activities carry the template's timestamps. After generation (and on
every run that reuses a cached database), a sample of generated runs is read back through
the tools (``workflow_run_get``, ``workflow_run_history`` to the end) and the checkpoint
store (``history``), and compared with its template.

The SQLite databases are cached in --cache (default ``bench/.scale-cache``) under a name
made of the parameters, with a JSON sidecar (generation time, the IDs measurements need);
a later run with the same parameters measures without regenerating. PostgreSQL databases
live in a schema named after the parameters, dropped afterwards unless --keep-postgres.

Measured operations (each a public front door; "tool" = `WorkflowTools.call` of the
session, as the MCP server calls it):

* start, open session - ``workflow_run_start`` of a 1-step loop run (returns once the
  first checkpoint is durable) in a session that is already owned;
* start, cold - what ``flowledger run start`` does: `host.open_session` (open the
  store, own the session: activation adopts its unfinished runs), then the start;
* run list first/last page - ``workflow_run_list`` with the default page size, in run ID
  order (the default) and newest first; the last page's cursor is computed beforehand;
* history first/last page - ``workflow_run_history`` of the long run (default page);
* latest checkpoint - `LedgerCheckpointStore.latest` of the long run, and
  ``workflow_run_get`` of it (which reads its latest checkpoint to assess readiness);
* resume - ``workflow_run_resume`` of an interrupted ``asker`` run (a vertex that asks
  for an increment), which returns after the run completes.

    python bench/scale.py [--runs 100000] [--checkpoints 1000000] [--long-revisions 10000]
                          [--repeat 50] [--postgres postgresql://...] [--sqlite/--no-sqlite]
    python bench/scale.py --quick        # 300 runs, 3000 checkpoints, a 200-revision run
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from flowledger import flow
from flowledger.host import open_session
from flowledger.storage import Store, open_store
from flowledger.tools.bundle import WorkflowTools
from flowledger.workflows import Catalog, Metadata, TypedDefinition, VertexMetadata
from flowledger.workflows.activities.activity import event_id
from flowledger.workflows.activities.journal import journal_name
from flowledger.workflows.records.registry import order_prefix
from flowledger.workflows.records.run import DEFAULT_RUN_PAGE_SIZE, Run, RunStatus, runs_prefix
from flowledger.workflows.runtime.session import WorkflowSession, default_session_id

GENERATOR_VERSION = 1  # part of the cache key: bump when the generator writes otherwise
HERE = Path(__file__).resolve().parent
LOOP_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["count", "goal"],
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "goal": {"type": "integer", "minimum": 0},
    },
}
RESUME_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["increment"],
    "properties": {"increment": {"type": "integer"}},
}
TEMPLATE_GOALS = (3, 4)  # 2 * goal + 3 checkpoints: 9 and 11
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
BATCH = 64  # generated runs written concurrently (PostgreSQL uses a pool)


@dataclass
class Loop:
    count: int = 0
    goal: int = 0


async def tick(state: Loop) -> dict[str, int]:
    return {"count": state.count + 1}


async def stop(state: Loop) -> dict[str, int]:
    return {}


async def ask(state: Loop) -> dict[str, int]:
    answer = flow.interrupt({"question": "how much?"})
    return {"count": state.count + int(answer["increment"])}


def catalog() -> Catalog:
    loop: flow.Graph[Loop] = flow.Graph("loop", state=Loop)
    loop.add_vertex("tick", tick)
    loop.add_vertex("stop", stop)
    loop.add_route(
        "tick", targets=["tick", "stop"], pick=lambda s: "tick" if s.count < s.goal else "stop"
    )
    asker: flow.Graph[Loop] = flow.Graph("asker", state=Loop)
    asker.add_vertex("ask", ask)
    out = Catalog()
    out.register(
        TypedDefinition(
            Metadata(
                "loop",
                "v1",
                description="counts to a goal",
                input_schema=LOOP_SCHEMA,
                vertices=[VertexMetadata("tick", "tick"), VertexMetadata("stop", "stop")],
            ),
            loop.compile(entry="tick", finish="stop", version="1"),
            max_steps=10_000_000,
        )
    )
    out.register(
        TypedDefinition(
            Metadata(
                "asker",
                "v1",
                description="asks for an increment",
                input_schema=LOOP_SCHEMA,
                resume_schema=RESUME_SCHEMA,
                vertices=[VertexMetadata("ask", "ask")],
            ),
            asker.compile(entry="ask", finish="ask", version="1"),
        )
    )
    return out


# -- generation ----------------------------------------------------------------------------


@dataclass
class Template:
    """An executed run and what it wrote, to be copied."""

    run: Run
    checkpoints: list[bytes]
    attachments: dict[str, bytes]
    activities: list[dict[str, Any]]  # parsed journal records, with their event ordinals


async def _read_log(store: Store, name: str) -> list[bytes]:
    out: list[bytes] = []
    while True:
        records = await store.ledger.read(name, after=len(out), limit=1000)
        if not records:
            return out
        out.extend(record.payload for record in records)


def _ordinal(session_id: str, run_id: str, doc: dict[str, Any]) -> int:
    activity = doc["activity"]
    for ordinal in range(64):
        made = event_id(
            session_id,
            run_id,
            activity["kind"],
            doc["revision"],
            activity.get("vertex_id"),
            ordinal,
        )
        if made == activity["event_id"]:
            return ordinal
    raise AssertionError(f"event {activity['event_id']} is not an event_id() of its run")


def _encode_activity(doc: dict[str, Any]) -> bytes:
    # the journal's record encoding (`journal._encode`); checked against the template below
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


async def template(session: WorkflowSession, tools: WorkflowTools, goal: int) -> Template:
    started = await tools.call(
        "workflow_run_start",
        {
            "definition_name": "loop",
            "definition_version": "v1",
            "input": {"count": 0, "goal": goal},
        },
    )
    await session.supervisor.wait_idle()
    run = await session.registry.get(session.session_id, str(started["run_id"]))
    assert run.status is RunStatus.COMPLETED, run
    store = session.store
    checkpoints = await _read_log(store, f"flow/runs/{run.graph_run_id}")
    digests: set[str] = set()
    for record in checkpoints:
        envelope = json.loads(record)
        digests.update(v for k in ("state", "step_base") if isinstance(v := envelope.get(k), str))
    manifests = await store.ledger.attachments(sorted(digests))
    fields = {
        v for data in manifests.values() for v in json.loads(data).values() if isinstance(v, str)
    }
    attachments = dict(manifests)
    if fields:
        attachments.update(await store.ledger.attachments(sorted(fields)))
    for data in attachments.values():  # shared unchanged by every copy: no run's IDs inside
        assert not UUID.search(data), data
    activities = []
    for raw in await _read_log(store, journal_name(session.session_id, run.id)):
        doc = json.loads(raw)
        assert _encode_activity(doc) == raw, "the journal's encoding changed"
        doc["ordinal"] = _ordinal(session.session_id, run.id, doc)
        activities.append(doc)
    return Template(run, checkpoints, attachments, activities)


def copy_run(tpl: Template, created: Any) -> tuple[Run, list[bytes], list[bytes]]:
    """A new run like ``tpl``: its record, checkpoint records and journal records."""
    run_id, graph_run_id = str(uuid.uuid4()), str(uuid.uuid4())
    run = dataclasses.replace(
        tpl.run,
        id=run_id,
        graph_run_id=graph_run_id,
        tool_execution_id=str(uuid.uuid4()),
        ledger_locator=f"flow/runs/{graph_run_id}",
        artifact_run_id=run_id,
        created_at=created,
        updated_at=created + (tpl.run.updated_at - tpl.run.created_at),
        revision=0,
    )
    names = {tpl.run.graph_run_id.encode(): graph_run_id.encode()}

    def fresh(match: re.Match[bytes]) -> bytes:
        old = match.group(0)
        if old not in names:
            names[old] = str(uuid.uuid4()).encode()
        return names[old]

    checkpoints = [UUID.sub(fresh, record) for record in tpl.checkpoints]
    activities = []
    for doc in tpl.activities:
        activity = dict(doc["activity"])
        activity["run_id"] = run_id
        activity["event_id"] = event_id(
            run.session_id,
            run_id,
            activity["kind"],
            doc["revision"],
            activity.get("vertex_id"),
            doc["ordinal"],
        )
        activities.append(_encode_activity({"revision": doc["revision"], "activity": activity}))
    return run, checkpoints, activities


async def write_copy(session: WorkflowSession, tpl: Template, created: Any) -> Run:
    run, checkpoints, activities = copy_run(tpl, created)
    ledger = session.store.ledger
    # checkpoints and journal before the record, as execution has them before it completes
    await ledger.append(
        f"flow/runs/{run.graph_run_id}", checkpoints, expected=0, attachments=tpl.attachments
    )
    await ledger.append(journal_name(run.session_id, run.id), activities, expected=0)
    return await session.registry.create(run)


async def long_run(session: WorkflowSession, tools: WorkflowTools, revisions: int) -> str:
    """A loop run executed for real whose last checkpoint revision is ``revisions``."""
    goal = max((revisions - 2) // 2, 0)  # 2 * goal + 3 checkpoints: revisions 0..2 * goal + 2
    started = await tools.call(
        "workflow_run_start",
        {
            "definition_name": "loop",
            "definition_version": "v1",
            "input": {"count": 0, "goal": goal},
        },
    )
    await session.supervisor.wait_idle()
    run_id = str(started["run_id"])
    run = await session.registry.get(session.session_id, run_id)
    assert run.status is RunStatus.COMPLETED, run
    return run_id


def _paths(run: Run, session_id: str) -> tuple[str, str]:
    return f"flow/runs/{run.graph_run_id}", journal_name(session_id, run.id)


async def verify(session: WorkflowSession, tools: WorkflowTools, info: dict[str, Any]) -> None:
    """Read sampled generated runs back through the tools and the checkpoint store and
    compare them with their templates (IDs aside)."""
    templates = {}
    for goal, run_id in info["templates"].items():
        templates[int(goal)] = await _readback(session, tools, run_id)
    for run_id, goal in info["sample"]:
        got = await _readback(session, tools, run_id)
        want = templates[goal]
        assert got == want, f"generated run {run_id} differs from its template:\n{got}\n{want}"


async def _readback(session: WorkflowSession, tools: WorkflowTools, run_id: str) -> Any:
    run = await tools.call("workflow_run_get", {"run_id": run_id})
    entries: list[dict[str, Any]] = []
    arguments: dict[str, Any] = {"run_id": run_id}
    while True:
        page = await tools.call("workflow_run_history", arguments)
        entries.extend(page["entries"])
        if "next_revision" not in page or not page["entries"]:
            break
        arguments = {
            "run_id": run_id,
            "after_revision": page["next_revision"],
            "after_event_id": page.get("next_event_id", ""),
        }
    record = await session.registry.get(session.session_id, run_id)
    history = await session.checkpoints.history(record.graph_run_id)
    drop = {"run_id", "event_id", "created_at", "updated_at", "occurred_at"}
    return (
        {k: v for k, v in run.items() if k not in drop},
        [{k: v for k, v in e.items() if k not in drop} for e in entries],
        [(cp.run.revision, cp.run.status, cp.run.step, cp.state, cp.frontier) for cp in history],
    )


async def generate(url: str, runs: int, checkpoints: int, revisions: int) -> dict[str, Any]:
    """Fill the database at ``url`` (empty when ``runs`` is 0); what measuring needs."""
    if runs:
        per_run = checkpoints / runs
        low, high = (2 * g + 3 for g in TEMPLATE_GOALS)
        if not low <= per_run <= high:
            raise SystemExit(f"--checkpoints / --runs must be in {low}..{high}, not {per_run:g}")
        # the share of 11-checkpoint copies that makes the total exact (or nearest)
        highs = round((checkpoints - low * runs) / (high - low))
    else:
        highs = 0
    begin = time.perf_counter()
    async with open_store(url) as store:
        sid = await default_session_id(store)
        session = WorkflowSession.build(store, sid, catalog())
        await session.supervisor.activate()
        try:
            tools = WorkflowTools.for_session(session)
            templates = {g: await template(session, tools, g) for g in TEMPLATE_GOALS}
            oldest = templates[TEMPLATE_GOALS[0]].run.created_at - timedelta(seconds=runs + 1)
            sample: list[tuple[str, int]] = []
            written = 0
            generated = 0
            for first in range(0, runs, BATCH):
                batch = range(first, min(first + BATCH, runs))
                # spread the 11-checkpoint copies evenly (Bresenham), so any prefix is mixed
                goals = [
                    TEMPLATE_GOALS[1]
                    if (n + 1) * highs // runs > n * highs // runs
                    else TEMPLATE_GOALS[0]
                    for n in batch
                ]
                made = await asyncio.gather(
                    *(
                        write_copy(session, templates[g], oldest + timedelta(seconds=n))
                        for n, g in zip(batch, goals, strict=True)
                    )
                )
                for n, g, run in zip(batch, goals, made, strict=True):
                    written += len(templates[g].checkpoints)
                    if n % max(runs // 16, 1) == 0 or n == runs - 1:
                        sample.append((run.id, g))
                generated += len(made)
                if first % (BATCH * 200) == 0 and first:
                    print(f"  {generated} runs, {written} checkpoints ...", flush=True)
            generation = time.perf_counter() - begin
            long_begin = time.perf_counter()
            long_id = await long_run(session, tools, revisions)
            long_time = time.perf_counter() - long_begin
            info = {
                "session_id": sid,
                "runs": generated,
                "checkpoints": written,
                "templates": {str(g): t.run.id for g, t in templates.items()},
                "sample": sample,
                "long_run": long_id,
                "generation_seconds": round(generation, 1),
                "long_run_seconds": round(long_time, 1),
            }
            check = time.perf_counter()
            await verify(session, tools, info)
            info["verify_seconds"] = round(time.perf_counter() - check, 1)
        finally:
            await session.supervisor.shutdown()
    return info


# -- measuring -----------------------------------------------------------------------------


Op = Callable[[], Awaitable[object]]


@dataclass
class Samples:
    wall: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)  # this process's CPU time


async def timed_pair(
    ops: tuple[Op, Op], repeat: int, before: tuple[Op, Op] | None = None
) -> tuple[Samples, Samples]:
    """``repeat`` timings of each op after two warm-up calls, empty and full in turn (so
    a change in the machine's load affects both alike)."""
    samples = (Samples(), Samples())
    for n in range(repeat + 2):
        for side in (0, 1):
            if before is not None:
                await before[side]()
            cpu = time.process_time()
            begin = time.perf_counter()
            await ops[side]()
            elapsed = time.perf_counter() - begin
            if n >= 2:
                samples[side].wall.append(elapsed)
                samples[side].cpu.append(time.process_time() - cpu)
    return samples


async def last_history_cursor(tools: WorkflowTools, run_id: str) -> dict[str, Any]:
    """The arguments of the long run's last history page (default page size)."""
    arguments: dict[str, Any] = {"run_id": run_id}
    while True:
        page = await tools.call("workflow_run_history", arguments)
        if "next_revision" not in page:
            return arguments
        following = {
            "run_id": run_id,
            "after_revision": page["next_revision"],
            "after_event_id": page.get("next_event_id", ""),
        }
        peek = await tools.call("workflow_run_history", following)
        if not peek["entries"]:
            return arguments
        arguments = following


class Opened:
    """One database's owned session and the operations measured on it."""

    def __init__(self, url: str, info: dict[str, Any], repeat: int) -> None:
        self.url, self.info, self.repeat = url, info, repeat
        self.catalog = catalog()

    async def cold_start(self) -> None:
        async with open_session(self.url, self.catalog, self.info["session_id"]) as session:
            tools = WorkflowTools.for_session(session)
            await tools.call("workflow_run_start", _loop_input(1))
            await session.supervisor.wait_idle()

    async def __aenter__(self) -> Opened:
        sid = self.info["session_id"]
        self.store = await open_store(self.url)
        session = self.session = WorkflowSession.build(self.store, sid, self.catalog)
        await session.supervisor.activate()
        tools = self.tools = WorkflowTools.for_session(session)
        long_id = self.info["long_run"]
        graph_run_id = (await session.registry.get(sid, long_id)).graph_run_id
        size = DEFAULT_RUN_PAGE_SIZE
        # the last pages' cursors, from every key (not measured)
        ids = [k[len(runs_prefix(sid)) :] for k in await self.store.kv.keys(runs_prefix(sid))]
        base = order_prefix(sid) + "all/"
        ranks = [k[len(base) :] for k in await self.store.kv.keys(base)]
        last_after = ids[-size - 1] if len(ids) > size else ""
        oldest_after = ranks[size] if len(ranks) > size else ""
        last_history = await last_history_cursor(tools, long_id)
        self.waiting: list[str] = []
        for _ in range(self.repeat + 2):
            started = await tools.call(
                "workflow_run_start",
                {"definition_name": "asker", "definition_version": "v1", "input": _goal(0)},
            )
            await session.supervisor.wait_idle()
            self.waiting.append(str(started["run_id"]))

        def call(name: str, arguments: dict[str, Any]) -> Op:
            return lambda: tools.call(name, arguments)

        async def resume() -> None:
            arguments = {"run_id": self.waiting.pop(), "resume": {"increment": 1}}
            result = await tools.call("workflow_run_resume", arguments)
            assert result["run_status"] == "completed", result

        self.ops: dict[str, tuple[Op, Op | None]] = {
            "start, open session": (
                call("workflow_run_start", _loop_input(1)),
                session.supervisor.wait_idle,
            ),
            "run list first page (run ID order)": (call("workflow_run_list", {}), None),
            "run list last page (run ID order)": (
                call("workflow_run_list", {"after": last_after}),
                None,
            ),
            "run list first page (newest)": (call("workflow_run_list", {"order": "newest"}), None),
            "run list last page (newest)": (
                call("workflow_run_list", {"order": "newest", "after": oldest_after}),
                None,
            ),
            "history first page (long run)": (
                call("workflow_run_history", {"run_id": long_id}),
                None,
            ),
            "history last page (long run)": (call("workflow_run_history", last_history), None),
            "latest checkpoint (long run)": (
                lambda: session.checkpoints.latest(graph_run_id),
                None,
            ),
            "workflow_run_get (long run)": (call("workflow_run_get", {"run_id": long_id}), None),
            "resume to completion": (resume, None),
        }
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.session.supervisor.shutdown()
        finally:
            await self.store.close()


async def _nothing() -> None:
    return None


async def measure(
    empty: tuple[str, dict[str, Any]], full: tuple[str, dict[str, Any]], repeat: int
) -> tuple[dict[str, Samples], dict[str, Samples]]:
    sides = (Opened(*empty, repeat), Opened(*full, repeat))
    times: tuple[dict[str, Samples], dict[str, Samples]] = ({}, {})
    name = "start, cold (open + activate + start)"
    # first, as the sessions opened below own the sessions
    times[0][name], times[1][name] = await timed_pair(
        (sides[0].cold_start, sides[1].cold_start), repeat
    )
    async with sides[0] as e, sides[1] as f:
        for name, (op, before) in e.ops.items():
            other, other_before = f.ops[name]
            times[0][name], times[1][name] = await timed_pair(
                (op, other),
                repeat,
                None if before is None else (before, other_before or _nothing),
            )
    return times


def _goal(goal: int) -> dict[str, int]:
    return {"count": 0, "goal": goal}


def _loop_input(goal: int) -> dict[str, Any]:
    return {"definition_name": "loop", "definition_version": "v1", "input": _goal(goal)}


# -- databases -----------------------------------------------------------------------------


@dataclass
class Backend:
    name: str
    url: Callable[[str], str]  # of a database name
    exists: Callable[[str], bool]
    size: Callable[[str], Awaitable[int]]
    drop: Callable[[str], Awaitable[None]]
    cache: Path

    def sidecar(self, name: str) -> Path:
        """The JSON beside a database: how it was generated, the IDs measuring needs."""
        suffix = ".postgres.json" if self.name == "PostgreSQL" else ".json"
        return self.cache / f"{name}{suffix}"


def sqlite_backend(cache: Path) -> Backend:
    def path(name: str) -> Path:
        return cache / f"{name}.db"

    async def size(name: str) -> int:
        return sum(p.stat().st_size for p in (path(name), Path(f"{path(name)}-wal")) if p.exists())

    async def drop(name: str) -> None:
        for p in (path(name), Path(f"{path(name)}-wal"), Path(f"{path(name)}-shm")):
            p.unlink(missing_ok=True)

    return Backend(
        "SQLite",
        lambda name: f"sqlite:///{path(name)}?synchronous=OFF",
        lambda name: path(name).exists(),
        size,
        drop,
        cache,
    )


def postgres_backend(url: str, cache: Path) -> Backend:
    import psycopg  # the project's PostgreSQL driver (a dependency of the backend)

    async def size(name: str) -> int:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            row = await (
                await conn.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relkind = 'r'",
                    (name,),
                )
            ).fetchone()
            return int(row[0]) if row else 0

    async def drop(name: str) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    sep = "&" if "?" in url else "?"
    return Backend(
        "PostgreSQL",
        lambda name: f"{url}{sep}schema={name}",
        lambda name: (cache / f"{name}.postgres.json").exists(),
        size,
        drop,
        cache,
    )


async def prepare(
    backend: Backend, name: str, runs: int, checkpoints: int, revisions: int
) -> dict[str, Any]:
    """The database ``name`` and its sidecar, generated unless cached."""
    sidecar = backend.sidecar(name)
    if backend.exists(name) and sidecar.exists():
        info: dict[str, Any] = json.loads(sidecar.read_text())
        async with open_store(backend.url(name)) as store:
            session = WorkflowSession.build(store, info["session_id"], catalog())
            await verify(session, WorkflowTools.for_session(session), info)
        info["cached"] = True
        return info
    await backend.drop(name)
    print(f"{backend.name}: generating {name} ...", flush=True)
    info = await generate(backend.url(name), runs, checkpoints, revisions)
    sidecar.write_text(json.dumps(info, indent=1))
    info["cached"] = False
    return info


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def ms(value: float) -> str:
    return f"{value * 1e3:.2f}"


def report(
    backend: Backend,
    empty: dict[str, Samples],
    full: dict[str, Samples],
    info: dict[str, Any],
    sizes: tuple[int, int],
) -> bool:
    print()
    print(
        f"{backend.name}: {info['runs']} runs, {info['checkpoints']} checkpoints generated in "
        f"{info['generation_seconds']} s{' (cached)' if info['cached'] else ''}; long run "
        f"executed in {info['long_run_seconds']} s; database {sizes[1] / 1e6:.0f} MB "
        f"(empty {sizes[0] / 1e6:.1f} MB); {len(next(iter(full.values())).wall)} "
        f"repetitions; load average {os.getloadavg()[0]:.1f}"
    )
    print()
    print(
        "| operation | empty median (min-max) | empty p99 | full median (min-max) | full p99 "
        "| ratio median | ratio p99 | CPU ratio median |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    flat = True
    for name, e in empty.items():
        f = full[name]
        em, fm = statistics.median(e.wall), statistics.median(f.wall)
        ratio = fm / em
        flat = flat and ratio <= 1.5
        cpu = statistics.median(f.cpu) / max(statistics.median(e.cpu), 1e-9)
        print(
            f"| {name} | {ms(em)} ({ms(min(e.wall))}-{ms(max(e.wall))}) | {ms(p99(e.wall))} | "
            f"{ms(fm)} ({ms(min(f.wall))}-{ms(max(f.wall))}) | {ms(p99(f.wall))} | "
            f"{ratio:.2f}x | {p99(f.wall) / p99(e.wall):.2f}x | {cpu:.2f}x |"
        )
    print()
    print("(times in ms, wall clock; CPU = this process's CPU time)")
    return flat


async def bench(backend: Backend, args: argparse.Namespace) -> bool:
    stem = f"scale_g{GENERATOR_VERSION}_r{args.runs}_c{args.checkpoints}_l{args.long_revisions}"
    empty_name, full_name = f"bench_{stem}_empty", f"bench_{stem}_full"
    empty_info = await prepare(backend, empty_name, 0, 0, args.long_revisions)
    full_info = await prepare(backend, full_name, args.runs, args.checkpoints, args.long_revisions)
    try:
        empty, full = await measure(
            (backend.url(empty_name), empty_info), (backend.url(full_name), full_info), args.repeat
        )
        sizes = (await backend.size(empty_name), await backend.size(full_name))
    finally:
        if backend.name == "PostgreSQL" and not args.keep_postgres:
            for name in (empty_name, full_name):
                await backend.drop(name)
                backend.sidecar(name).unlink(missing_ok=True)
    return report(backend, empty, full, full_info, sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--checkpoints", type=int, default=1_000_000)
    parser.add_argument("--long-revisions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL (a schema per database)")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--keep-postgres", action="store_true", help="keep the schemas (cache)")
    parser.add_argument("--cache", type=Path, default=HERE / ".scale-cache")
    parser.add_argument(
        "--quick", action="store_true", help="300 runs, 3000 checkpoints, 200 revisions"
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.checkpoints, args.long_revisions = 300, 3000, 200
        args.repeat = min(args.repeat, 20)
    args.cache.mkdir(parents=True, exist_ok=True)
    backends = [] if args.no_sqlite else [sqlite_backend(args.cache)]
    if args.postgres:
        backends.append(postgres_backend(args.postgres, args.cache))
    results = [asyncio.run(bench(backend, args)) for backend in backends]
    print()
    print("every ratio at most 1.5x" if all(results) else "some ratio is above 1.5x")


if __name__ == "__main__":
    main()
