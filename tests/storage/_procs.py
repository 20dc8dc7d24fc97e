"""Concurrency helpers for the conformance suite: event-loop threads and child processes.

Imported by the tests, it offers `LoopThread` (an event loop on its own thread, whose
loop a test can block to simulate a stalled holder), `run_threads` and `Child` (a
subprocess speaking JSON lines).

Run as a script, it is the child process of ``test_processes.py``::

    python _procs.py hold URL NAME TTL
        acquire NAME with TTL, print {"epoch": n}; on the line "release" from stdin,
        release and print {"released": true, "lost": reason}; hold (renewing) until then
        or until killed.
    python _procs.py contend URL NAME SECONDS
        print {"ready": true}, wait for "go" on stdin, then for SECONDS repeatedly
        acquire / hold briefly / release NAME, printing one JSON line per grant:
        {"epoch": n, "start": t0, "end": t1, "lost": bool} (times from time.monotonic,
        which on Linux is one clock for every process), then {"done": true}.
    python _procs.py own URL NAME TTL
        acquire NAME with TTL, print {"epoch": n}; then keep writing a KV counter every
        20 ms, printing {"writing": true} after the third write. On the first refused
        write print {"write_error": type name, "reason": ...}; then wait for the lease's
        loss and print {"lost": reason, "refused": type name of one more write's error}.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SCRIPT = Path(__file__).resolve()


def shares_state(url: str) -> bool:
    """True when two stores opened on ``url`` see the same data (false for ``memory://``)."""
    return not url.startswith("memory:")


class LoopThread:
    """An asyncio event loop running forever on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run ``coro`` on the thread's loop and wait (blocking) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Like `run`, awaitable from another event loop without blocking it."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def block(self, seconds: float) -> None:
        """Freeze the loop for ``seconds`` (a stalled process: no renewals run)."""
        self.loop.call_soon_threadsafe(time.sleep, seconds)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def run_threads(count: int, target: Callable[[int], T], timeout: float = 30.0) -> list[T]:
    """Run ``target(i)`` for i in range(count) on ``count`` threads started together."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def main(i: int) -> None:
        try:
            barrier.wait(timeout)
            results[i] = target(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        raise errors[0]
    return results


class Child:
    """A child process running this script; reads its JSON lines on a background thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(SCRIPT), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next JSON line; fails with the child's stderr if it exits first."""
        line = self._lines.get(timeout=timeout)
        if line is None:
            self.proc.wait(5)
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"child exited with {self.proc.returncode}: {stderr}")
        message: dict[str, Any] = json.loads(line)
        return message

    async def aread(self, wait: float = 10.0) -> dict[str, Any]:
        return await asyncio.to_thread(self.read, wait)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


# --- child side -------------------------------------------------------------------------


def _emit(**message: Any) -> None:
    print(json.dumps(message), flush=True)


async def _hold(url: str, name: str, ttl: float) -> None:
    from flowledger.storage import open_store

    async with open_store(url) as store:
        lease = await store.leases.acquire(name, ttl=ttl)
        _emit(epoch=lease.epoch)
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if line.strip() == "release" or not line:
                await lease.release()
                _emit(released=True, lost=lease.lost_reason)
                return


async def _contend(url: str, name: str, seconds: float) -> None:
    from flowledger.storage import LeaseHeldError, open_store

    async with open_store(url) as store:
        _emit(ready=True)
        await asyncio.to_thread(sys.stdin.readline)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                lease = await store.leases.acquire(name, ttl=2.0)
            except LeaseHeldError:
                await asyncio.sleep(0.001)
                continue
            start = time.monotonic()
            await asyncio.sleep(0.01)
            end = time.monotonic()
            lost = lease.lost
            await lease.release()
            _emit(epoch=lease.epoch, start=start, end=end, lost=lost)
            await asyncio.sleep(random.uniform(0.002, 0.006))
        _emit(done=True)


async def _own(url: str, name: str, ttl: float) -> None:
    from flowledger.storage import StorageError, open_store

    async with open_store(url) as store:
        lease = await store.leases.acquire(name, ttl=ttl)
        _emit(epoch=lease.epoch)
        revision, writes = 0, 0
        while True:
            try:
                revision = await store.kv.put("owned/counter", b"%d" % writes, expected=revision)
            except StorageError as exc:
                _emit(write_error=type(exc).__name__, reason=getattr(exc, "reason", str(exc)))
                break
            writes += 1
            if writes == 3:
                _emit(writing=True)
            await asyncio.sleep(0.02)
        reason = await asyncio.wait_for(lease.wait_lost(), 60)
        try:
            await store.kv.put("owned/counter", b"again", expected=revision)
            refused = None
        except StorageError as exc:
            refused = type(exc).__name__
        _emit(lost=reason, refused=refused)


def main(argv: list[str]) -> None:
    mode, url, name, number = argv
    if mode == "hold":
        asyncio.run(_hold(url, name, float(number)))
    elif mode == "contend":
        asyncio.run(_contend(url, name, float(number)))
    elif mode == "own":
        asyncio.run(_own(url, name, float(number)))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
