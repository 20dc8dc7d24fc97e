"""At-least-once tasks, exactly-once effects: a task whose checkpoint is lost runs again
after recovery, with the same `flow.run_info().idempotency_key`; a side effect keyed by it
(a create-only KV put) therefore happens once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.storage import ConflictError, open_store

from .faults import Fault, FaultKind, faulty


@pytest.mark.parametrize("kind", [FaultKind.BEFORE, FaultKind.AFTER])
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_side_effect_keyed_by_the_idempotency_key_happens_once(
    backend: str, kind: FaultKind, tmp_path: Path
) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/fx.db"
    async with open_store(url) as real:
        store, faults = faulty(real)
        keys: list[str] = []
        effects: list[str] = []

        graph: flow.Graph[dict[str, Any]] = flow.Graph("payments", state=dict)

        @graph.vertex("pay")
        async def pay(state: dict[str, Any]) -> dict[str, Any]:
            key = flow.run_info().idempotency_key
            keys.append(key)
            name = "effects/" + key.replace("=", "-")
            try:  # the side effect: create-only, so a second attempt is recognised
                await real.kv.put(name, b"paid", expected=0)
                effects.append(key)
            except ConflictError:
                pass
            return {"paid": True}

        runner = graph.compile(
            entry="pay", finish="pay", store=flow.LedgerCheckpointStore(store.ledger)
        )
        faults.arm()  # an undisturbed run, to find the step's commit: the second append
        await runner.run({"paid": False})
        commit = [i + 1 for i, c in enumerate(faults.calls) if c.startswith("ledger.append")][1]
        keys.clear()
        effects.clear()
        faults.arm(Fault(kind, commit))
        with pytest.raises(flow.StoreError):
            await runner.run({"paid": False})
        faults.disarm()
        run_id = faults.fired[0].rsplit("/", 1)[1]
        if kind is FaultKind.BEFORE:  # the step was lost: recovery runs the task again
            result = await runner.resume(run_id, None)
            assert result.run.status is flow.RunStatus.COMPLETED
            assert len(keys) == 2 and keys[0] == keys[1]
        else:  # the step committed; only the reply was lost: nothing runs again
            assert (await runner.status(run_id)).status is flow.RunStatus.COMPLETED
            assert len(keys) == 1
        assert effects == keys[:1]
        assert "effects/" + keys[0].replace("=", "-") in await real.kv.keys("effects/")
