"""The cost of admission checks per start (issue #28, item 4).

One process owns a fresh session (SQLite file; PostgreSQL: a fresh schema on
``FLOWLEDGER_TEST_POSTGRES_URL``) and starts ``--runs`` runs of a two-step counter one
after another (start, wait until it completed), first with no limit, then with a
``max_running`` limit of each ``--limits`` value on the definition. Uncontended: every
start finds a free slot, so this is the price of the check itself (the limit read, the
queue entry written and removed, the head read, the slot scan and compare-and-swap).
Printed per backend and limit: the time of `Admission.admit` per start and the whole
start (create -> completed), median and min-max in milliseconds, with the load average
(the machine is shared).

    .venv/bin/python bench/admission.py --runs 40 --limits 2,32 --backends sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._postgres import postgres_url
from tests.workflows.conftest import Gates, build_session

from flowledger.storage import open_store
from flowledger.workflows.admission import Admission, Limits
from flowledger.workflows.records.run import Run


async def one(url: str, runs: int, limit: int | None) -> tuple[list[float], list[float]]:
    async with open_store(url) as store:
        session = build_session(store, str(uuid.uuid4()), Gates())
        if limit is not None:
            await Limits(store.kv).set("definition", "counter", limit)
        supervisor = session.supervisor()
        checks: list[float] = []
        admission = supervisor.admission
        assert isinstance(admission, Admission)
        plain = admission.admit

        async def timed(run: Run) -> bool:
            began = time.perf_counter()
            try:
                return await plain(run)
            finally:
                checks.append((time.perf_counter() - began) * 1000)

        admission.admit = timed  # type: ignore[method-assign]
        await supervisor.activate()
        whole: list[float] = []
        try:
            for _ in range(runs):
                began = time.perf_counter()
                run = await session.create_run()
                await (await supervisor.start(run.id)).wait()
                await supervisor.wait_idle()
                whole.append((time.perf_counter() - began) * 1000)
        finally:
            await supervisor.shutdown()
        return checks, whole


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--limits", default="2,32")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    limits: list[int | None] = [None, *(int(x) for x in args.limits.split(","))]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'backend':9} {'max_running':>11}  {'admit ms, median (min-max)':>28}  "
        f"{'start -> completed ms':>26}"
    )
    for backend in args.backends.split(","):
        for limit in limits:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as folder:
                    got = await one(f"sqlite:///{folder}/a.db", args.runs, limit)
            else:
                with postgres_url() as url:
                    got = await one(url, args.runs, limit)
            checks, whole = got
            shown = "none" if limit is None else str(limit)
            print(f"{backend:9} {shown:>11}  {summary(checks):>28}  {summary(whole):>26}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
