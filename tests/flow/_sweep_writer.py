"""A writer process for ``test_sweep_race.py``: checkpoint runs whose states share a few
large fields, through one `LedgerCheckpointStore` (so its cache skips what it knows is
stored and names it in refs), while the test process drops logs and sweeps.

    python _sweep_writer.py URL WRITER RUNS [RUN_ID...]

For run ``i`` it appends revision 0, then revision 1 (`state_for`), and prints one JSON
line per run: {"writer": w, "i": i, "run": id, "written": revisions}. The last runs get
the RUN_IDs given (the test never drops those while the writers run), the others new
ids. A run dropped between its two appends ends with written 1 (its second append
conflicted). Last it prints {"done": true, "refused": n}: appends the ledger refused
because an attachment the store believed stored had been swept (each then re-sent by
the store).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from flowledger import flow
from flowledger.flow import Checkpoint, RevisionConflictError, RunRecord, RunStatus, StepPhase
from flowledger.flow.ids import new_run_id
from flowledger.storage import AttachmentNotFoundError, open_store

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
# A few large fields that many runs share: one object each, as a live state keeps them.
SHARED = [f"{k}:" + "shared field " * 40 for k in range(5)]


def state_for(i: int, revision: int) -> dict[str, Any]:
    """Run ``i``'s state at ``revision``: shared fields, and for some runs one of its own."""
    kind = i % 3
    if kind == 0:  # only shared fields: the manifest is shared too
        return {"a": SHARED[i % 5], "b": SHARED[(i + 1) % 5]}
    if kind == 1:  # a large field of its own
        return {"a": SHARED[i % 5], "own": f"{i}:" + "o" * 3000}
    return {"a": SHARED[i % 5], "revision": revision}  # manifests shared per revision


def checkpoint(run_id: str, i: int, revision: int) -> Checkpoint:
    run = RunRecord(
        graph_run_id=run_id,
        graph_id="g",
        graph_version="0" * 64 + ":0",
        status=RunStatus.RUNNING,
        step=revision,
        revision=revision,
        created_at=T0,
        started_at=T0,
        updated_at=T0 + timedelta(seconds=revision),
    )
    return Checkpoint(run=run, phase=StepPhase.ROUTED, state=state_for(i, revision), frontier=["a"])


class Counting:
    """The store's ledger, counting appends refused for a swept attachment."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def append(self, name: str, records: Any, *, refs: Iterable[str] = (), **kw: Any) -> int:
        try:
            result: int = await self.inner.append(name, records, refs=refs, **kw)
        except AttachmentNotFoundError:
            self.refused += 1
            raise
        return result


async def main(url: str, writer: int, runs: int, given: list[str]) -> None:
    async with open_store(url) as storage:
        ledger = Counting(storage.ledger)
        store = flow.LedgerCheckpointStore(ledger)  # type: ignore[arg-type]
        first_given = runs - len(given)
        for i in range(runs):
            run_id = given[i - first_given] if i >= first_given else new_run_id()
            await store.append([checkpoint(run_id, i, 0)])
            written = 1
            try:
                await store.append([checkpoint(run_id, i, 1)])
                written = 2
            except RevisionConflictError:
                pass  # dropped by the test between the two appends
            print(json.dumps({"writer": writer, "i": i, "run": run_id, "written": written}))
        print(json.dumps({"done": True, "refused": ledger.refused}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]))
