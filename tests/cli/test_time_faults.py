"""Random SIGKILLs around timer wakes, deadline expiries and schedule firings, with real
``flowledger worker`` processes on SQLite and PostgreSQL.

Runs park on short timers (``napper``), pause with short deadlines (``asker``; half of
them also get a resume racing the deadline through a front door), and a 1-second
interval schedule (``catch_up: all``) fires ``ticker`` runs, while a seeded plan
(`tests.cli._fleet`) SIGKILLs workers from outside at random times and makes each worker
SIGKILL itself at a random write around a wake, a deadline or a firing
(`tests.cli._kill_points`), and restarts them. Then unarmed workers finish the work and:

* every timer woke exactly once: each napper completed, its ``after`` vertex ran (one
  mark at least) and only ever at one step - a run again after its owner died before the
  checkpoint was durable has the same step; a second wake would have another;
* every deadline resolved exactly once, and every racing resume got a definite answer
  that matches the outcome: approved iff the resume was accepted; the other answer ran
  only in an owner that was SIGKILLed before its step was durable;
* every schedule slot from the first to the cursor fired exactly one run that ran at one
  step, none was skipped (``catch_up: all``).

The seed is printed, and named in every assertion: ``FLOWLEDGER_FAULT_SEED=<seed>``
replays the plan. The only time limits are deadlines that catch hangs.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger.cli.runtime import Options, open_host
from flowledger.host import open_session
from flowledger.storage import open_store
from flowledger.tools.bundle import WorkflowTools
from flowledger.tools.errors import ToolError
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.records.run import Run
from flowledger.workflows.runtime.session import default_session_id
from flowledger.workflows.schedules import MAX_CATCH_UP, ScheduleStore

from .._postgres import postgres_url
from ._fleet import APP, Fleet, Plan
from ._time_faults_app import catalog
from .conftest import Cli

HANG = 120.0  # seconds: catches a hang, never a timing bound


def _seed() -> int:
    chosen = os.environ.get("FLOWLEDGER_FAULT_SEED")
    return int(chosen) if chosen else random.SystemRandom().randrange(2**32)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'faults.db'}"
    else:
        with postgres_url() as url:
            yield url


# -- reading the outcome -------------------------------------------------------------------


async def _runs(db: str) -> list[Run]:
    async with open_store(db) as store:
        session_id = await default_session_id(store)
        registry = RunRegistry(store.kv)
        runs, after = [], ""
        while True:
            page = await registry.list(session_id, after=after, limit=100)
            runs.extend(page.runs)
            if not page.next:
                return runs
            after = page.next


async def _schedule(db: str) -> dict[str, Any]:
    async with open_store(db) as store:
        (schedule,) = await ScheduleStore(store.kv).list(await default_session_id(store))
        return schedule.to_json()


def _marks(path: Path) -> dict[str, list[tuple[int, int, str]]]:
    """graph run ID -> [(step, pid, value)] in the order written."""
    marks: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    if path.exists():
        for line in path.read_text().splitlines():
            _, run, step, pid, value = line.split()
            marks[run].append((int(step), int(pid), value))
    return marks


def _wait(check: Any, what: str, fleet: Fleet | None = None) -> None:
    deadline = time.monotonic() + HANG
    while not check():
        assert time.monotonic() < deadline, f"hang: {what} ({fleet and fleet.summary()})"
        if fleet is not None:
            fleet.step()
        time.sleep(0.2)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _reruns(runs: list[Run], marks: dict[str, list[tuple[int, int, str]]], fleet: Fleet) -> int:
    """Check that each run's vertex ran, and at one step only (a run again after its
    owner died before the step was durable has the same step); return how many such
    re-runs there were."""
    reruns = 0
    for run in runs:
        mine = marks.get(run.graph_run_id, [])
        assert mine, f"{fleet.summary()}: {run.definition_name} {run.id} never ran: lost"
        steps = {step for step, _, _ in mine}
        assert len(steps) == 1, f"{fleet.summary()}: {run.id} ran at steps {steps}: doubled"
        reruns += len(mine) - 1
    return reruns


# -- resumes racing deadlines ----------------------------------------------------------------


@dataclass
class Race:
    run_id: str
    at: datetime  # when the resume is sent (around the deadline)
    answer: str = ""  # "won", or the refusal

    def run(self, db: str) -> None:
        async def resume() -> str:
            async with open_host(Options(db=db, app=APP), owner=False, front_door=True) as host:
                try:
                    await host.call(
                        "workflow_run_resume", {"run_id": self.run_id, "resume": {"approved": True}}
                    )
                except ToolError as refused:
                    return f"refused: {refused}"
                return "won"

        delay = (self.at - datetime.now(UTC)).total_seconds()
        if delay > 0:
            time.sleep(delay)
        self.answer = asyncio.run(resume())


# -- the test ---------------------------------------------------------------------------------


async def _start_runs(db: str, rng: random.Random, count: int) -> list[str]:
    """``count`` nappers and ``count`` askers, each with 3-13 s to go (started by an owner
    in this process, which lets go of the session before the workers come)."""
    async with open_session(db, catalog()) as session:
        tools = WorkflowTools.for_session(session)
        ids = []
        for name in ("napper", "asker") * count:
            started = await tools.call(
                "workflow_run_start",
                {
                    "definition_name": name,
                    "definition_version": "v1",
                    "input": {"seconds": round(rng.uniform(3.0, 13.0), 2)},
                },
            )
            ids.append(str(started["run_id"]))
        for run_id in ids:
            for _ in range(int(HANG / 0.05)):
                got = await tools.call("workflow_run_get", {"run_id": run_id})
                if got["run_status"] == "interrupted":
                    break
                await asyncio.sleep(0.05)
            assert got["run_status"] == "interrupted", got
        return ids


async def _deadline(db: str, run_id: str) -> datetime:
    async with open_host(Options(db=db, app=APP), owner=False) as host:
        got = await host.call("workflow_run_get", {"run_id": run_id})
        return _time(got["pending"]["wake_at"])


async def _resumes(db: str, run_id: str) -> int:
    async with open_host(Options(db=db, app=APP), owner=False) as host:
        history = await host.call("workflow_run_history", {"run_id": run_id})
        return sum(entry["kind"] == "run_resumed" for entry in history["entries"])


def _add_schedule(db: str, tmp: Path) -> dict[str, Any]:
    added = Cli(db, tmp).json(
        "schedule", "add", "ticker", "v1", "--app", APP, "--every", "1", "--catch-up", "all",
        "--overlap", "allow", "--input", "{}",
    )  # fmt: skip
    assert isinstance(added, dict)
    return added


def _pause(db: str, tmp: Path, schedule_id: str) -> bool:
    """Pause the schedule; False when the owner moved its cursor meanwhile (the pause is a
    compare-and-swap, refused with a conflict that wrote nothing: try again)."""
    paused = Cli(db, tmp)("schedule", "pause", schedule_id, "--app", APP)
    assert paused.exit_code == 0 or "changed meanwhile" in paused.output, paused.output
    return paused.exit_code == 0


def _settled(db: str) -> bool:
    """A pass under way when the pause came goes on with the slots it found due before
    it (a catch-up after the last kill may hold many): settled once the record counts
    every run listed, and each of them finished."""
    schedule = asyncio.run(_schedule(db))
    scheduled = [r for r in asyncio.run(_runs(db)) if r.scheduled_by is not None]
    return schedule["fired"] == len(scheduled) and all(r.status.terminal for r in scheduled)


def _check_schedule(db: str, tmp: Path, fleet: Fleet, added: dict[str, Any]) -> str:
    """Once the schedule has caught up past the last kill, pause it, wait for its runs,
    stop the workers and check: every slot from its creation to its cursor fired one run,
    which ran at one step, except slots skipped by ``catch_up: all``'s bound. Return the
    counts."""
    calm_at = datetime.now(UTC)
    _wait(
        lambda: _time(asyncio.run(_schedule(db))["cursor"]) > calm_at + timedelta(seconds=1),
        "the schedule caught up after the last kill",
        fleet,
    )
    _wait(lambda: _pause(db, tmp, added["schedule_id"]), "the schedule paused", fleet)
    _wait(lambda: _settled(db), "the schedule's record and its runs agree, all finished", fleet)
    # a run listed late (after the look above) may still be pending: with no pass under way
    # any more, one fresh worker finishes what is left (a paused schedule fires nothing)
    fleet.stop()
    fleet.spawn(armed=False)
    _wait(lambda: fleet.up() and _settled(db), "the last scheduled runs finished", fleet)
    fleet.stop()
    schedule = asyncio.run(_schedule(db))
    scheduled = [r for r in asyncio.run(_runs(db)) if r.scheduled_by is not None]
    per_slot = Counter(r.scheduled_by.slot for r in scheduled if r.scheduled_by)
    duplicates = sum(n - 1 for n in per_slot.values())
    first, last = _time(added["cursor"]), _time(schedule["cursor"])
    span = int((last - first).total_seconds())
    expected = [first + timedelta(seconds=n) for n in range(1, span + 1)]
    assert duplicates == 0, f"{fleet.summary()}: doubled slots {per_slot.most_common(3)}"
    assert set(per_slot) <= set(expected), f"{fleet.summary()}: fired past the cursor"
    # catch_up all fires the newest MAX_CATCH_UP due slots: only a slot that many behind
    # the newest due one can be skipped (a long outage; here, churn on a busy machine)
    missed = sorted(set(expected) - set(per_slot))
    bound = last - timedelta(seconds=MAX_CATCH_UP)
    assert all(slot <= bound for slot in missed), f"{fleet.summary()}: missed {missed}"
    assert schedule["fired"] == len(scheduled), schedule
    assert schedule["skipped"] == len(missed), (fleet.summary(), schedule)
    unfinished = [(r.id, str(r.status), r.status_summary) for r in scheduled if not _done(r)]
    assert not unfinished, f"{fleet.summary()}: {unfinished}"
    reruns = _reruns(scheduled, _marks(fleet.marks), fleet)
    return (
        f"firings={len(scheduled)} slots={span} skipped={len(missed)} "
        f"duplicates={duplicates} reruns={reruns}"
    )


def _done(run: Run) -> bool:
    return str(run.status) == "completed"


def _chaos(fleet: Fleet, seconds: float, kills: int) -> None:
    """Kill and restart workers for ``seconds``, and on until ``kills`` kills happened (a
    busy machine starts workers slowly), then calm down."""
    until = time.monotonic() + seconds
    deadline = until + HANG
    while time.monotonic() < until or fleet.kills < kills:
        assert time.monotonic() < deadline, f"hang: {kills} kills ({fleet.summary()})"
        fleet.step()
        time.sleep(0.05)
    fleet.calm()


def test_random_sigkills_around_wakes_deadlines_and_firings(db: str, tmp_path: Path) -> None:
    seed = _seed()
    print(f"FLOWLEDGER_FAULT_SEED={seed}")
    rng = random.Random(seed)
    ids = asyncio.run(_start_runs(db, rng, 8))
    added = _add_schedule(db, tmp_path)
    races = [
        Race(run_id, asyncio.run(_deadline(db, run_id)) + timedelta(seconds=rng.uniform(-1, 0.5)))
        for run_id in ids[1::4]  # every other asker
    ]
    threads = [threading.Thread(target=race.run, args=(db,), daemon=True) for race in races]
    fleet = Fleet(db, tmp_path, seed, size=2)
    try:
        fleet.start()
        for thread in threads:
            thread.start()
        _chaos(fleet, 15, kills=6)
        _wait(
            lambda: all(r.status.terminal for r in asyncio.run(_runs(db)) if r.id in ids),
            "every napper and asker finished",
            fleet,
        )
        for thread in threads:
            thread.join(HANG)
        schedule_counts = _check_schedule(db, tmp_path, fleet, added)
    finally:
        fleet.kill_all()

    runs = {r.id: r for r in asyncio.run(_runs(db))}
    marks = _marks(fleet.marks)
    nappers = [runs[i] for i in ids if runs[i].definition_name == "napper"]
    askers = [runs[i] for i in ids if runs[i].definition_name == "asker"]
    unfinished = [(r.id, str(r.status), r.status_summary) for r in nappers + askers if not _done(r)]
    assert not unfinished, f"{fleet.summary()}: {unfinished}"
    wake_reruns = _reruns(nappers, marks, fleet)
    answer_reruns = _reruns(askers, marks, fleet)
    won = {race.run_id for race in races if race.answer == "won"}
    # A definite answer: it won, it lost (the owner found the pause answered: "not
    # interrupted"; or the run had already gone on when the tool read it: "requires
    # interrupted run"), or it was withdrawn unseen.
    lost = ("not interrupted", "resume requires interrupted run", "no worker resumed")
    for race in races:
        assert race.answer == "won" or any(reason in race.answer for reason in lost), (
            fleet.summary(),
            race,
        )
    for run in askers:
        approved = run.id in won
        assert run.status_summary == f"approved={approved}", (fleet.summary(), run.id)
        # the loser never ran - but for an owner SIGKILLed before its step was durable
        losers = {pid for _, pid, value in marks[run.graph_run_id] if value != str(approved)}
        assert losers <= fleet.killed, (fleet.summary(), run.id, marks[run.graph_run_id])
    for run in nappers + askers:  # one resume each in the history: the wake, or the answer
        assert asyncio.run(_resumes(db, run.id)) == 1, (fleet.summary(), run.id)
    print(
        f"{fleet.summary()} kill_points={sorted(Counter(fleet.kill_points()).items())} "
        f"wakes={len(nappers)} wake_reruns={wake_reruns} deadlines={len(askers)} "
        f"races_won={len(won)}/{len(races)} answer_reruns={answer_reruns} {schedule_counts}"
    )


def test_three_workers_fire_a_one_second_schedule_for_30_s_under_kills(tmp_path: Path) -> None:
    """Three ``flowledger worker`` processes on PostgreSQL, a 1-second interval schedule
    (``catch_up: all``) for 30 s while workers are SIGKILLed (from outside, and by
    themselves around firings) and restarted: exactly one run per slot, none missed but
    by the catch-up bound."""
    seed = _seed()
    print(f"FLOWLEDGER_FAULT_SEED={seed}")
    with postgres_url() as db:
        added = _add_schedule(db, tmp_path)
        # owners live longer here than in the test above: a schedule firing every second
        # must keep up with its slots between the kills
        fleet = Fleet(db, tmp_path, seed, size=3, plan=Plan(self_kill_within=20))
        try:
            fleet.start()
            _chaos(fleet, 30, kills=8)
            counts = _check_schedule(db, tmp_path, fleet, added)
        finally:
            fleet.kill_all()
    print(f"{fleet.summary()} kill_points={sorted(Counter(fleet.kill_points()).items())} {counts}")
