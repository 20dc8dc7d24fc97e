"""How a command that owns the session ends: at the next step boundary, saying what it left.

While a command owns the session (``start``, ``resume``, ``cancel``, ``demo``), the
first SIGINT (Ctrl-C), SIGTERM or SIGPIPE, or its standard output closing (``flowledger
start ... | head -2``), asks the supervisor to stop at the next step boundary
(`Supervisor.request_stop`): the steps in flight commit, nothing new begins. A second
SIGINT or SIGTERM stops at once (the steps in flight are run again by the next owner).
Either way the command then releases the session lease and prints one line on stderr per
run it leaves unfinished::

    run 3f04... left running at revision 7; it continues when any owner opens the
    session (flowledger resume 3f04...)

and exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM, 141 for a
closed pipe, as shells report a process ended by that signal).

A closed pipe is noticed when a write fails (SIGPIPE, or ``BrokenPipeError`` from a
write to stdout) and, for a pipe or socket, at once by a thread that waits for the error
condition on file descriptor 1; from then on this process's stdout goes to the null
device, so nothing fails (or is reported by Python at exit) for want of a reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

__all__ = ["Departure", "OwnerExit"]

PIPE_EXIT_CODE: Final = 128 + 13  # what a shell reports for a process ended by SIGPIPE


@dataclass(frozen=True)
class Departure:
    """Why the command stops early, and the exit code that says so."""

    reason: str
    exit_code: int


class _PipeSafeStdout:
    """``sys.stdout`` that turns a closed pipe into a stop request instead of an error."""

    def __init__(self, inner: IO[str], closed: Callable[[], None]) -> None:
        self._inner = inner
        self._closed = closed
        self._gone = False

    def _lost(self) -> None:
        if not self._gone:
            self._gone = True
            _point_stdout_at_null()
            self._closed()

    def write(self, text: str) -> int:
        if self._gone:
            return len(text)
        try:
            return self._inner.write(text)
        except BrokenPipeError:
            self._lost()
            return len(text)

    def flush(self) -> None:
        if self._gone:
            return
        try:
            self._inner.flush()
        except BrokenPipeError:
            self._lost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _point_stdout_at_null() -> None:
    """Make file descriptor 1 the null device: the reader is gone, and Python flushing
    what is still buffered (now, or at exit) must not fail."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
        finally:
            os.close(null)


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _wait_for_reader_gone(
    fd: int, wake: int, loop: asyncio.AbstractEventLoop, gone: Callable[[], None]
) -> None:
    """Thread body: block until ``fd`` (the write end of a pipe, or a socket) reports an
    error or hang-up - poll(2) reports those even when no event is asked for - or until
    ``wake`` becomes readable (the command is over)."""
    poller = select.poll()
    poller.register(fd, 0)
    poller.register(wake, select.POLLIN)
    try:
        while True:
            events = dict(poller.poll())
            if wake in events:
                return
            if events.get(fd, 0) & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                    loop.call_soon_threadsafe(gone)
                return
    except OSError:
        return
    finally:
        os.close(wake)


class OwnerExit:
    """Installs the signal handlers and the closed-stdout detection around an owning
    command (a context manager, entered on the event loop's thread). ``stop`` is the
    supervisor's `request_stop`; ``notice`` prints a line on stderr."""

    def __init__(self, stop: Callable[[], None], notice: Callable[[str], None]) -> None:
        self._stop = stop
        self._notice = notice
        self.departure: Departure | None = None
        self.forced = False
        self._task: asyncio.Task[Any] | None = None

    def _request(self, departure: Departure, message: str) -> None:
        if self.departure is None:
            self.departure = departure
            self._notice(message)
            self._stop()

    def _on_signal(self, signum: signal.Signals) -> None:
        if signum is signal.SIGPIPE:
            self._pipe_closed()
            return
        name = signum.name
        if self.departure is None:
            self._request(
                Departure(name, 128 + signum.value),
                f"{name}: stopping at the next step boundary (send {name} again to stop at once)",
            )
            return
        if not self.forced and self._task is not None:
            self.forced = True
            self.departure = Departure(name, 128 + signum.value)
            self._notice(f"{name}: stopping now; the steps in flight will run again")
            self._task.cancel()

    def detach(self) -> None:
        """Leave at once when the command ends (``start --detach``): the work in flight is
        cut, and the next owner continues from the last durable checkpoint."""
        self.forced = True

    def _pipe_closed(self) -> None:
        _point_stdout_at_null()
        self._request(
            Departure("output closed", PIPE_EXIT_CODE),
            "output closed: stopping at the next step boundary",
        )

    @contextlib.contextmanager
    def installed(self) -> Iterator[OwnerExit]:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        previous: dict[signal.Signals, Any] = {}
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            before = signal.getsignal(signum)
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._on_signal, signum)
                previous[signum] = before
        original = sys.stdout
        guard = _PipeSafeStdout(original, self._pipe_closed)
        sys.stdout = guard  # a delegating stand-in
        wake = -1
        if _is_pipe_or_socket(1):
            wake_read, wake = os.pipe()
            threading.Thread(
                target=_wait_for_reader_gone,
                args=(1, wake_read, loop, self._pipe_closed),
                name="flowledger-stdout-watch",
                daemon=True,
            ).start()
        try:
            yield self
        finally:
            if wake >= 0:
                os.close(wake)  # wakes the watching thread, which closes its end
            if sys.stdout is guard:
                sys.stdout = original
            for signum, before in previous.items():
                loop.remove_signal_handler(signum)
                # asyncio resets to the default; SIGPIPE must stay ignored (Python's own
                # setting), or a later write to a closed pipe would kill the process.
                with contextlib.suppress(ValueError, OSError, TypeError):
                    signal.signal(signum, before)
