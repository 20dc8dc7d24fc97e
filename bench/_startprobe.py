"""Timestamps along a front-door start, for ``bench/wakeups.py --breakdown``.

`install` wraps a few functions of whatever ``flowledger`` is on the path (each only if
that version has it) so that every process of a round - the front door and each worker -
appends one JSON line per event to the file named by ``FLOWLEDGER_START_PROBE``:
``{"pid", "t" (time.monotonic, one clock for every process of the machine), "event",
...}``. Events:

* ``door_start`` / ``door_woke``: `FrontDoor.start` entered (the tool has written the
  pending run, its input and index entry) / returned (the ``NOTIFY`` sent);
* ``woken``: a listener heard a wake-up (``channels`` it listens to);
* ``tick``: a worker's tick began;
* ``running``: the owner wrote the run record ``running`` (the start's record swap);
* ``seeded``: the owner's ``on_run_start`` hook ran (revision 0 durable).

Not part of flowledger: it only observes, and costs a write per event.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

_out: Any = None


def record(event: str, **fields: Any) -> None:
    if _out is None:
        return
    line = {"pid": os.getpid(), "t": time.monotonic(), "event": event, **fields}
    _out.write(json.dumps(line) + "\n")
    _out.flush()


def _wrap_async(owner: Any, name: str, before: str | None, after: str | None) -> None:
    original = getattr(owner, name, None)
    if original is None:
        return

    @functools.wraps(original)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            record(before)
        result = await original(*args, **kwargs)
        if after:
            record(after)
        return result

    setattr(owner, name, wrapped)


def install() -> None:
    global _out
    path = os.environ.get("FLOWLEDGER_START_PROBE")
    if not path:
        return
    _out = open(path, "a", buffering=1)  # noqa: SIM115 - kept for the process's life

    from flowledger.storage import wakeups
    from flowledger.workflows.runtime import frontdoor, worker
    from flowledger.workflows.runtime.supervisor import seeding

    woken = wakeups.Listener._woken

    def heard(self: Any) -> None:
        record("woken", channels=list(self.channels))
        woken(self)

    wakeups.Listener._woken = heard  # type: ignore[method-assign]
    _wrap_async(frontdoor.FrontDoor, "start", "door_start", "door_woke")
    _wrap_async(worker.Worker, "tick", "tick", None)

    transition = getattr(seeding, "transition", None)
    announce = getattr(seeding, "announce_seed", None)
    if transition is None or announce is None:
        return  # code from before wake-ups: the front door's events only

    async def traced_transition(sup: Any, run: Any, status: Any, *args: Any) -> Any:
        result = await transition(sup, run, status, *args)
        if str(status) in ("running", "RunStatus.RUNNING"):
            record("running", run=run.id)
        return result

    seeding.transition = traced_transition  # type: ignore[assignment]

    def traced_announce(sup: Any) -> Any:
        hook = announce(sup)

        async def traced(record_: Any) -> None:
            record("seeded")
            await hook(record_)

        return traced

    seeding.announce_seed = traced_announce  # type: ignore[assignment]
