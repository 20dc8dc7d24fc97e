"""Client CPU of one PostgreSQL statement: flowledger's async path against a sync connection.

What stands between FlowledgerSaver and PostgresSaver on the loop's steps (see
docs/benchmarks.md, "LangGraph savers") is client CPU per statement, not statements per
step (FlowledgerSaver sends one per step, PostgresSaver two pipelines). This measures,
alternated, user CPU per ``SELECT 1`` (binary results, as the stores read):

* ``store`` - the way every flowledger statement runs: the connection the store keeps at
  hand between calls (``Database.connection``, see ``storage/postgres/checkout.py``), an
  ``AsyncConnection.execute`` on the asyncio loop;
* ``pool`` - the same through the pool's own ``connection()`` context manager (flowledger
  before);
* ``async`` - the same on one async connection held throughout (no pool);
* ``sync`` - a psycopg ``Connection`` (what ``PostgresSaver`` uses);

and the CPU of converting one loop step's ledger append parameters (psycopg's query
conversion and dumping) with its arrays as plain lists in text form (``%s``), as plain
lists in binary form (``%b``, psycopg's generic list dumper) and as
``arrays.ByteaArray``/``IntegerArray`` (binary, packed in one pass: flowledger now).

``python bench/postgres_client_cpu.py [--n 3000] [--reps 5] [--postgres-url URL]``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import resource
import statistics
import sys
from collections.abc import Callable
from typing import Any

SELECT = b"SELECT 1"


def user_us(run: Callable[[], None], n: int) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    run()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_utime - before) / n * 1e6


async def statements(url: str, n: int, reps: int) -> dict[str, list[float]]:
    import psycopg

    from flowledger.storage import open_store

    out: dict[str, list[float]] = {"store": [], "pool": [], "async": [], "sync": []}
    async with open_store(url) as store:
        db = store.ledger._db  # type: ignore[attr-defined]
        sync = psycopg.connect(db.settings.conninfo, autocommit=True)
        try:
            for _ in range(reps):
                before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
                for _ in range(n):
                    async with db.connection() as conn:
                        await (await conn.execute(SELECT, binary=True)).fetchone()
                used = resource.getrusage(resource.RUSAGE_SELF).ru_utime - before
                out["store"].append(used / n * 1e6)
                before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
                for _ in range(n):
                    async with db._pool.connection() as conn:
                        await (await conn.execute(SELECT, binary=True)).fetchone()
                used = resource.getrusage(resource.RUSAGE_SELF).ru_utime - before
                out["pool"].append(used / n * 1e6)
                async with db.connection() as conn:
                    before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
                    for _ in range(n):
                        await (await conn.execute(SELECT, binary=True)).fetchone()
                    used = resource.getrusage(resource.RUSAGE_SELF).ru_utime - before
                out["async"].append(used / n * 1e6)

                def run_sync() -> None:
                    for _ in range(n):
                        sync.execute(SELECT, binary=True).fetchone()

                out["sync"].append(user_us(run_sync, n))
        finally:
            sync.execute("DROP SCHEMA IF EXISTS bench_client_cpu CASCADE")
            sync.close()
    return out


def conversions(url: str, n: int, reps: int) -> dict[str, list[float]]:
    """One loop step's append: two records, one new attachment, three refs."""
    import psycopg
    from psycopg._queries import PostgresQuery
    from psycopg.adapt import Transformer

    from flowledger.storage.postgres.arrays import ByteaArray, IntegerArray, register
    from flowledger.storage.postgres.queries import Queries

    binary = Queries.for_schema("flowledger").append_advance
    text = binary.replace(b"%b::", b"%s::")
    payloads = [b'{"c": "' + b"y" * 700 + b'"}', b'{"w": 1}']
    blob = b"z" * 300
    digest = hashlib.sha256(blob).digest()
    refs = [hashlib.sha256(b"%d" % i).digest() for i in range(3)]
    referred = sorted([digest, *refs])
    params: tuple[Any, ...] = (
        *(referred, refs),
        *(5, "langgraph/t", 3),
        *(len(refs), 3, payloads, [123456789, -42], referred, [digest], [blob]),
    )
    typed = tuple(
        (IntegerArray(p) if isinstance(p[0], int) else ByteaArray(p)) if isinstance(p, list) else p
        for p in params
    )
    out: dict[str, list[float]] = {"text": [], "binary": [], "typed": []}
    with psycopg.connect(url) as conn:
        register(conn)
        for _ in range(reps):
            for name, query, values in (
                ("text", text, params),
                ("binary", binary, params),
                ("typed", binary, typed),
            ):

                def run(query: bytes = query, values: tuple[Any, ...] = values) -> None:
                    for _ in range(n):
                        PostgresQuery(Transformer(conn)).convert(query, values)

                out[name].append(user_us(run, n))
    return out


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "FLOWLEDGER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    url = args.postgres_url
    sep = "&" if "?" in url else "?"
    found = asyncio.run(statements(f"{url}{sep}schema=bench_client_cpu", args.n, args.reps))
    found.update(conversions(url, args.n, args.reps))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cores, load {load}; user CPU µs, median (min-max) of {args.reps}")
    print("| what | µs |\n|---|--:|")
    for name, label in (
        ("store", "`SELECT 1`: a store call (the connection at hand), async connection"),
        ("pool", "`SELECT 1`: the pool's connection() context manager, async connection"),
        ("async", "`SELECT 1`: one async connection held"),
        ("sync", "`SELECT 1`: a sync connection (PostgresSaver's way)"),
        ("text", "a loop step's append parameters, arrays as text lists"),
        ("binary", "a loop step's append parameters, arrays as binary lists"),
        ("typed", "a loop step's append parameters, arrays as ByteaArray/IntegerArray"),
    ):
        print(f"| {label} | {cell(found[name])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
