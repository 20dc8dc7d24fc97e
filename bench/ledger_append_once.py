"""N ledger appends through `SQLiteLedger.append_blocking`, for instruction counts.

``python bench/ledger_append_once.py PATH N`` opens ``sqlite:///PATH?synchronous=FULL``,
makes a first write and waits until the database's directory has settled
(`flowledger.storage.sqlite.folder`: from then on every append's file check is one
``stat``, as in a long-lived store, whatever the machine's speed), then appends N times two
records of 300 bytes to one log from a plain thread (the path of `FlowledgerSaver`'s steps)
and prints done.

Under ``valgrind --tool=callgrind`` the count for N=600 less the count for N=200, over 400,
is the instructions of one append with the start-up taken out::

    valgrind --tool=callgrind --callgrind-out-file=OUT \
        python bench/ledger_append_once.py /tmp/append.db 600
"""

from __future__ import annotations

import asyncio
import os
import sys

from flowledger.storage import BlockingAppend, open_store

SETTLE_SECONDS = 3.5  # above folder.SETTLED_NS (3 s)
RECORD = b"r" * 300


def appends(ledger: BlockingAppend, n: int) -> None:
    tip = 0
    for _ in range(n):
        tip = ledger.append_blocking("bench/append", [RECORD, RECORD], expected=tip)


async def run(path: str, n: int) -> None:
    async with open_store(f"sqlite:///{path}?synchronous=FULL") as store:
        await store.kv.put("settle", b"x", expected=0)
        await asyncio.sleep(SETTLE_SECONDS)
        assert isinstance(store.ledger, BlockingAppend)
        await asyncio.to_thread(appends, store.ledger, n)
    print("done")


def main(path: str, n: int) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    asyncio.run(run(path, n))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
