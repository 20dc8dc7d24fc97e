"""Child process of ``test_kill_matrix.py``: drives the built-in ``document_review`` through
a supervisor on a database, with a short session lease so a SIGKILLed owner is replaced
quickly.

    python _kill_driver.py start  URL SESSION   # start a review; run until idle (paused)
    python _kill_driver.py finish URL SESSION   # own the session (adopting what a killed
                                                # owner left), resume a paused review,
                                                # run until idle

Prints one JSON line at the end: ``{"run_id": ..., "status": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from flowledger.host import load_catalog, open_session
from flowledger.tools import WorkflowTools
from flowledger.workflows.errors import SessionOwnedError
from flowledger.workflows.records.run import RunStatus

LEASE_TTL = 0.5
REVIEW_INPUT = {"title": "Notes", "document": "The first sentence. It mentions 3 numbers."}
RESUME = b'{"approved": true, "note": "ship it"}'


async def owned(url: str, session_id: str):  # type: ignore[no-untyped-def]
    """Open and own the session, waiting out a killed owner's lease."""
    deadline = time.monotonic() + 30
    while True:
        context = open_session(url, load_catalog(), session_id, lease_ttl=LEASE_TTL)
        try:
            session = await context.__aenter__()
            return context, session
        except SessionOwnedError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def main(mode: str, url: str, session_id: str) -> None:
    context, session = await owned(url, session_id)
    try:
        supervisor = session.supervisor
        if mode == "start":
            tools = WorkflowTools(
                session_id,
                catalog=session.catalog,
                registry=session.registry,
                inputs=session.inputs,
                supervisor=supervisor,
            )
            await tools.call(
                "workflow_run_start",
                {
                    "definition_name": "document_review",
                    "definition_version": "v1",
                    "input": REVIEW_INPUT,
                },
            )
        error = await supervisor.wait_idle()
        if error is not None:
            raise error
        page = await session.registry.list(session_id, limit=10)
        run = page.runs[0]
        if mode == "finish" and run.status is RunStatus.INTERRUPTED:
            await supervisor.resume(run.id, RESUME)
            error = await supervisor.wait_idle()
            if error is not None:
                raise error
        run = await session.registry.get(session_id, run.id)
        print(json.dumps({"run_id": run.id, "status": str(run.status)}), flush=True)
    finally:
        await context.__aexit__(None, None, None)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
