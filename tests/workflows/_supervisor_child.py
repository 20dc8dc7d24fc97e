"""A supervisor in a child process, for the SIGKILL tests: it starts a counter run whose
second vertex blocks forever, prints the run id, and waits to be killed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flowledger.storage import open_store
from tests.workflows.conftest import build_session


async def main(url: str, session_id: str, name: str) -> None:
    async with open_store(url) as store:
        session = build_session(store, session_id)
        session.gates.close("two")
        supervisor = session.supervisor(lease_ttl=1.0)
        await supervisor.activate()
        run = await session.create_run(name, {"count": 0})
        await (await supervisor.start(run.id)).wait()
        if name == "counter":
            await session.gates.entered["two"].wait()
        else:
            await supervisor.wait_idle()
        print(run.id, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
