"""`QuietFolder`: one ``stat`` that proves no entry of a directory changed since a check.

`Database.check_files` looks up the database file and its ``-wal`` and ``-shm`` files
before every write (three ``stat`` calls, about 7 % of a durable step's CPU). Every way
those paths can change - a file deleted, renamed away, or replaced by another - changes
an entry of their directory, and the kernel then sets the directory's modification and
change times to its current (real-time) clock. So when the directory still shows the
same device, inode, mtime and ctime as when it was read just before a full check that
passed, no entry changed since, and the full check can be skipped.

One condition makes that sound: a later change must not be able to produce the very
same timestamps. File systems store times at a granularity (jiffies; a whole second or
two on some), so two changes close together can share one. Timestamps are therefore
trusted only once they are at least `SETTLED_NS` older than the clock at the moment the
directory was read; any change after that gets a newer time. The ctime cannot be set
from user space (``utime`` sets it to now), so restoring an old mtime by hand does not
fool it. While the directory is younger than that (a database just created), the
full check runs as before and the directory is not even read.

What it does not see, like any path check made between writes: a mount placed over
the database file itself (not a change of the directory), and a real-time clock set
back by more than `SETTLED_NS` at which a later change lands on exactly the same
nanoseconds of both times.

The file timestamps come from the kernel's real-time clock, so this compares them with
`time.time_ns` (that same clock) and not with `flowledger.clock`, which may be a
test's manual clock.
"""

from __future__ import annotations

import os
import time
from typing import Final

__all__ = ["SETTLED_NS", "QuietFolder"]

#: How much older than the clock a directory's times must be to be trusted: above the
#: coarsest timestamp granularity of common file systems (FAT's 2 s) and the lag of the
#: kernel's coarse clock.
SETTLED_NS: Final = 3_000_000_000


class QuietFolder:
    """Whether a directory's entries are unchanged since the last full check that passed.

    Use: ``if folder.unchanged(): skip`` else ``mark = folder.read()``, run the full check,
    then ``folder.passed(mark)`` if it passed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._settled: tuple[int, int, int, int] | None = None
        self._young_until = 0  # clock (ns) before which the directory is known too young

    def unchanged(self) -> bool:
        """True if the directory shows the times recorded by `passed` (one ``stat``)."""
        if self._settled is None:
            return False
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns) == self._settled

    def read(self) -> tuple[int, int, int, int] | None:
        """Read the directory before a full check: its identity and times if they are
        settled (old enough to be trusted), else None."""
        self._settled = None
        now = time.time_ns()
        if now < self._young_until:
            return None  # read recently and too young then: no need to look again yet
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        newest = max(info.st_mtime_ns, info.st_ctime_ns)
        if now - newest < SETTLED_NS:
            self._young_until = newest + SETTLED_NS
            return None
        return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)

    def passed(self, mark: tuple[int, int, int, int] | None) -> None:
        """The full check that followed `read` passed: trust ``mark`` from now on."""
        self._settled = mark
