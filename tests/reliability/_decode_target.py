"""The checkpoint-decode fuzz target shared by ``test_fuzz.py`` (hypothesis) and
``fuzz_checkpoint_decode.py`` (atheris, by hand).

`decode_log` writes arbitrary bytes into a fresh in-memory ledger as a checkpoint log - on
their own, or in place of one record of a real run's log - and reads the log back through
`LedgerCheckpointStore` exactly as a resume or adoption would. The only acceptable
failures are the engine's typed errors; anything else is a bug.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Any

from flowledger import flow
from flowledger.storage import AttachmentNotFoundError
from flowledger.storage.memory import MemoryLedger

RUN_ID = "6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5"
LOG = f"flow/runs/{RUN_ID}"
TYPED = (flow.FlowError,)  # StoreError, CheckpointDecodeError, CheckpointNotFoundError, ...


@dataclass
class Counter:
    count: int = 0
    note: str = ""


async def _real_log() -> tuple[list[bytes], dict[str, bytes]]:
    """The records and attachments of a real run: seed, vertices, an interrupt, a resume."""
    ledger = MemoryLedger()
    store = flow.LedgerCheckpointStore(ledger)
    graph: flow.Graph[Counter] = flow.Graph("fuzz", state=Counter)

    @graph.vertex("one")
    async def one(state: Counter) -> dict[str, Any]:
        return {"count": state.count + 1, "note": "x" * 300}

    @graph.vertex("ask")
    async def ask(state: Counter) -> dict[str, Any]:
        answer = flow.interrupt({"question": "more?"})
        return {"count": state.count + int(answer)}

    graph.add_edge("one", "ask")
    runner = graph.compile(entry="one", finish="ask", store=store)
    result = await runner.run(Counter(), run_id=RUN_ID)
    await runner.resume(result.run.graph_run_id, 2)
    records = [r.payload for r in await ledger.read(LOG, limit=1000)]
    attachments: dict[str, bytes] = {}
    for digest in _digests(records):  # some 64-hex strings are not attachments
        with contextlib.suppress(AttachmentNotFoundError):
            attachments.update(await ledger.attachments([digest]))
    return records, attachments


def _digests(records: list[bytes]) -> set[str]:
    return {m.decode() for r in records for m in re.findall(rb"[0-9a-f]{64}", r)}


RECORDS, ATTACHMENTS = asyncio.run(_real_log())


async def _decode(records: list[bytes], attachments: dict[str, bytes]) -> None:
    ledger = MemoryLedger()
    await ledger.append(LOG, records, expected=0, attachments=attachments)
    store = flow.LedgerCheckpointStore(ledger)
    with contextlib.suppress(*TYPED):
        await store.history(RUN_ID)
    with contextlib.suppress(*TYPED):
        await store.latest(RUN_ID)


def decode_log(data: bytes) -> None:
    """Fuzz entry: the first byte picks the mode, the rest is the record."""
    if not data:
        return
    mode, body = data[0], data[1:]
    if not body:
        return
    records = list(RECORDS)
    if mode % 3 == 0 or not records:
        records = [body]
    elif mode % 3 == 1:
        records[mode % len(records)] = body
    else:
        records = [*records[: 1 + mode % len(records)], body]
    asyncio.run(_decode(records[:64], ATTACHMENTS))
