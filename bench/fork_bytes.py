"""Bytes a fork writes: a run whose state holds one large text field, forked at a step
boundary with and without a patch, on a SQLite file.

Counted: the bytes each append hands to the backend (records and attachments; an upper
bound of what it stores, since attachments are insert-if-absent), and the growth of the
SQLite tables that hold ledger records and attachments. No timing: byte counts do not
depend on the machine's load.

    .venv/bin/python bench/fork_bytes.py [--kib 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowledger import flow
from flowledger.storage import open_store


@dataclass
class Loop:
    n: int = 0
    limit: int = 2
    log: list[str] = field(default_factory=list)
    blob: str = ""


def loop_graph(store: Any) -> flow.Runner[Loop]:
    graph: flow.Graph[Loop] = flow.Graph("loop", state=Loop)
    graph.add_vertex("tick", lambda s: {"n": s.n + 1, "log": [*s.log, f"t{s.n + 1}"]})
    graph.add_vertex("fin", lambda s: {"log": [*s.log, "fin"]})
    graph.add_route(
        "tick", targets=["tick", "fin"], pick=lambda s: "tick" if s.n < s.limit else "fin"
    )
    return graph.compile(entry="tick", finish="fin", store=store, version="1")


class CountingLedger:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bytes = 0

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        **options: Any,
    ) -> int:
        self.bytes += sum(map(len, records)) + sum(map(len, (attachments or {}).values()))
        result: int = await self.inner.append(
            name, records, expected=expected, attachments=attachments, **options
        )
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def table_bytes(path: str) -> tuple[int, int]:
    """(ledger record bytes, attachment bytes) as the SQLite backend stores them today."""
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("pragma table_info(ledger_records)")}
        column = "content" if "content" in columns else "payload"
        records = db.execute(f"select coalesce(sum(length({column})), 0) from ledger_records")
        attachments = db.execute("select coalesce(sum(length(data)), 0) from attachments")
        return int(records.fetchone()[0]), int(attachments.fetchone()[0])


async def main(kib: int) -> None:
    path = f"{tempfile.mkdtemp()}/fork.db"
    async with open_store(f"sqlite:///{path}") as storage:
        first = loop_graph(flow.LedgerCheckpointStore(storage.ledger))
        origin = await first.run(Loop(blob="x" * kib * 1024))
        start = table_bytes(path)
        print(
            f"origin ({origin.run.revision + 1} checkpoints): records {start[0]} B, "
            f"attachments {start[1]} B"
        )
        counting = CountingLedger(storage.ledger)
        runner = loop_graph(flow.LedgerCheckpointStore(counting))  # a cold cache
        for label, patch in (("fork, no patch", None), ("fork, patch {limit: 9}", {"limit": 9})):
            handed = counting.bytes
            before = table_bytes(path)
            await runner.fork(origin.run.graph_run_id, 3, patch)
            after = table_bytes(path)
            print(
                f"{label}: handed to the backend {counting.bytes - handed} B; "
                f"records +{after[0] - before[0]} B, attachments +{after[1] - before[1]} B"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kib", type=int, default=100, help="size of the large field")
    asyncio.run(main(parser.parse_args().kib))
