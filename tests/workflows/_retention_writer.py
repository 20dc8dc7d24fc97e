"""A writer process for the retention load test: owns the session and starts runs of the
semantics catalog with a few shared inputs, finishing most of them and leaving every
tenth interrupted. Prints one JSON line: the interrupted run IDs and any failures."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flowledger.host import open_session
from tests.workflows._retention_support import Runs, catalog


async def main(url: str, count: int, shared: int) -> None:
    interrupted: list[str] = []
    errors: list[str] = []
    async with open_session(url, catalog()) as session:
        runs = Runs(session)
        for i in range(count):
            text = f"shared input {i % shared}"
            try:
                if i % 10 == 0:
                    interrupted.append(await runs.interrupted(text))
                else:
                    await runs.completed(text)
            except Exception as exc:  # reported, and the test fails on it
                errors.append(f"run {i}: {type(exc).__name__}: {exc}")
    print(json.dumps({"interrupted": interrupted, "errors": errors}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
