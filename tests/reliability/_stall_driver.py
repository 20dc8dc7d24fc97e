"""A session owner in a child process that stops itself (SIGSTOP) just before one kind of
write, for `test_stale_owner.py`.

    python _stall_driver.py URL SESSION_ID RUN_ID KIND TTL

KIND names the write to stop at: ``checkpoint`` (the run's second checkpoint append, after
its first vertex ran), ``registry`` (the first swap of the run's record), ``journal`` (the
first publication to the run's activity journal) or ``request`` (the first write to the
run's resume request, when the owner handles it). The owner activates over the session,
which adopts the run (a pending counter run, or an interrupted asker run with a resume
request waiting), and prints JSON lines:

* ``{"vertex": id}`` whenever a task starts;
* ``{"stalling": write}`` just before it stops itself;
* ``{"write": write, "error": type or null}`` for the first write after it continued
  (``CancelledError`` when a lease renewal noticed the loss first and stopped the work);
* ``{"stopped": true, "fenced": bool, "active": bool}`` once the supervisor stopped owning
  the session (or after 60 s), then it shuts down and exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flowledger.storage import KV, Entry, Fence, Ledger, Record, Store, open_store
from flowledger.workflows.activities.journal import journal_name
from flowledger.workflows.records.requests import RunRequests, resume_request_key
from flowledger.workflows.records.run import run_key
from tests.workflows.conftest import Gates, build_session


def emit(**message: Any) -> None:
    print(json.dumps(message), flush=True)


class Stall:
    """Stops the process before the ``nth`` write to ``target`` (a key or log name), and
    reports the outcome of the first write after it."""

    def __init__(self, target: str, nth: int) -> None:
        self.target = target
        self.left = nth
        self.done = False  # the first write after the stop has ended

    async def write(self, name: str, perform: Any) -> Any:
        if name == self.target:
            self.left -= 1
            if self.left == 0:
                emit(stalling=name)
                os.kill(os.getpid(), signal.SIGSTOP)
                try:
                    result = await perform()
                except BaseException as exc:  # CancelledError too: the loss was noticed first
                    emit(write=name, error=type(exc).__name__)
                    raise
                else:
                    emit(write=name, error=None)
                finally:
                    self.done = True
                return result
        return await perform()


class StallingKV:
    def __init__(self, inner: KV, stall: Stall) -> None:
        self._inner = inner
        self._stall = stall

    async def get(self, key: str) -> Entry:
        return await self._inner.get(key)

    async def put(
        self, key: str, value: bytes, *, expected: int, fence: Fence | None = None
    ) -> int:
        return await self._stall.write(
            key, lambda: self._inner.put(key, value, expected=expected, fence=fence)
        )

    async def delete(self, key: str, *, fence: Fence | None = None) -> None:
        await self._stall.write(key, lambda: self._inner.delete(key, fence=fence))

    async def keys(self, prefix: str = "") -> list[str]:
        return await self._inner.keys(prefix)


class StallingLedger:
    def __init__(self, inner: Ledger, stall: Stall) -> None:
        self._inner = inner
        self._stall = stall

    def __getattr__(self, name: str) -> Any:
        # drop, sweep, usage, vacuum and the reference calls pass straight through
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    async def append(
        self,
        name: str,
        records: Sequence[bytes],
        *,
        expected: int,
        attachments: Mapping[str, bytes] | None = None,
        refs: Iterable[str] = (),
        fence: Fence | None = None,
    ) -> int:
        return await self._stall.write(
            name,
            lambda: self._inner.append(
                name, records, expected=expected, attachments=attachments, refs=refs, fence=fence
            ),
        )

    async def read(self, name: str, *, after: int = 0, limit: int = 100) -> list[Record]:
        return await self._inner.read(name, after=after, limit=limit)

    async def tip(self, name: str) -> int:
        return await self._inner.tip(name)

    async def names(self, prefix: str = "") -> list[str]:
        return await self._inner.names(prefix)

    async def attachments(self, digests: Iterable[str]) -> dict[str, bytes]:
        return await self._inner.attachments(digests)


class ReportingGates(Gates):
    async def pass_through(self, vertex: str) -> None:
        emit(vertex=vertex)
        await super().pass_through(vertex)


def target(kind: str, session_id: str, run_id: str, graph_run_id: str) -> tuple[str, int]:
    if kind == "checkpoint":
        return f"flow/runs/{graph_run_id}", 2
    if kind == "registry":
        return run_key(session_id, run_id), 1
    if kind == "journal":
        return journal_name(session_id, run_id), 1
    if kind == "request":
        return resume_request_key(session_id, run_id), 1
    raise SystemExit(f"unknown kind {kind!r}")


async def main(url: str, session_id: str, run_id: str, kind: str, ttl: float) -> None:
    async with open_store(url) as real:
        probe = build_session(real, session_id)
        run = await probe.registry.get(session_id, run_id)
        stall = Stall(*target(kind, session_id, run_id, run.graph_run_id))
        store = Store(
            url,
            StallingKV(real.kv, stall),
            real.blobs,
            StallingLedger(real.ledger, stall),
            real.leases,
        )
        session = build_session(store, session_id, ReportingGates())
        supervisor = session.supervisor(
            lease_ttl=ttl, requests=RunRequests(store.kv), poll_interval=0.05
        )
        await supervisor.activate()
        for _ in range(6000):
            if stall.done and not supervisor.active:
                break
            await asyncio.sleep(0.01)
        emit(stopped=True, fenced=supervisor._fenced_off, active=supervisor.active)
        await supervisor.shutdown()


if __name__ == "__main__":
    url, session_id, run_id, kind, ttl = sys.argv[1:]
    asyncio.run(main(url, session_id, run_id, kind, float(ttl)))
