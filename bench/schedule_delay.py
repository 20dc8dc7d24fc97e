"""Schedule firing delay: how late after its slot a 1-second interval schedule fires.

One process owns a fresh session (SQLite file; PostgreSQL: a fresh schema on
``FLOWLEDGER_TEST_POSTGRES_URL``) and runs its `ScheduleLoop` on the system clock for
``--slots`` slots of an ``every: 1`` schedule (``overlap: allow``) of a two-step counter
definition. For each firing, the delay is the firing record's ``fired_at`` minus its
slot (when the loop woke and decided the slot), and the run's first durable checkpoint
minus its slot (when the run was started). Printed per backend: median, p90 and min-max
in milliseconds, and the load average (the machine is shared).

``--targets definition,deployment`` also schedules a deployment (an artifact of one end
node, no sources) instead of the definition, alternating the two per backend in one run:
a deployment's firing adds the before-start check (no sources to connect to here) and
the pin, so the difference is the deploy layer's own cost per firing.

    python bench/schedule_delay.py --slots 20 --backends sqlite,postgres
    python bench/schedule_delay.py --slots 20 --backends sqlite,postgres \
        --targets definition,deployment
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._postgres import postgres_url
from tests.workflows.conftest import Gates, counter_definition

from flowledger import flow
from flowledger.deploy import DeployService
from flowledger.storage import open_store
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.session import WorkflowSession
from flowledger.workflows.schedules import ScheduleLoop, Schedules


def catalog() -> Catalog:
    found = Catalog()
    found.register(counter_definition(flow.MemoryCheckpointStore(), Gates()))
    return found


ARTIFACT = {
    "format": "flowledger.artifact/v1",
    "name": "tick",
    "version": "1",
    "input_schema": {
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "additionalProperties": False,
    },
    "output_schema": {"type": "object", "additionalProperties": False},
    "start": "done",
    "nodes": {"done": {"kind": "end", "outcome": "ok"}},
}
DEPLOYMENT = {
    "format": "flowledger.deployment/v1",
    "name": "tick",
    "artifact": {"name": "tick", "version": "1"},
    "sources": {},
}


async def one_backend(url: str, slots: int, target: str) -> tuple[list[float], list[float]]:
    async with open_store(url) as store:
        session = WorkflowSession.build(store, str(uuid.uuid4()), catalog())
        target_of: dict[str, str] = {"definition_name": "counter", "definition_version": "v1"}
        if target == "deployment":
            deploy = DeployService(session)
            await deploy.artifact_save(ARTIFACT)
            await deploy.deployment_save(DEPLOYMENT)
            await deploy.serve_deployments()
            target_of = {"deployment": "tick"}
        await session.supervisor.activate()
        loop = ScheduleLoop(session)
        schedules = Schedules(session, loop=loop)
        try:
            schedule = await schedules.add(
                **target_of, input={"count": 0}, every=1, overlap="allow"
            )
            loop.start()
            while (await schedules.get(schedule.id)).fired < slots:  # noqa: ASYNC110 - a read
                await asyncio.sleep(0.2)
            await loop.close()
            await session.supervisor.wait_idle()
            firings = await schedules.store.firings(session.session_id, schedule.id, slots)
            decided = [(f.fired_at - f.slot).total_seconds() * 1000 for f in firings]
            started = []
            for firing in firings:
                (first,) = await session.checkpoints.history(
                    (await session.registry.get(session.session_id, firing.run_id)).graph_run_id,
                    limit=1,
                )
                started.append((first.run.created_at - firing.slot).total_seconds() * 1000)
            return decided, started
        finally:
            await loop.close()
            await session.supervisor.shutdown()


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"median {statistics.median(ordered):.1f} ms, p90 {p90:.1f} ms "
        f"({ordered[0]:.1f}-{ordered[-1]:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--targets", default="definition", help="definition,deployment")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        for target in args.targets.split(","):
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as folder:
                    decided, started = asyncio.run(
                        one_backend(f"sqlite:///{folder}/bench.db", args.slots, target)
                    )
            else:
                with postgres_url() as url:
                    decided, started = asyncio.run(one_backend(url, args.slots, target))
            print(f"{backend}, {target}: {args.slots} slots")
            print(f"  decided after the slot: {summary(decided)}")
            print(f"  first checkpoint after the slot: {summary(started)}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
