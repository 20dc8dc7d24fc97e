"""A stdio server's stderr, kept apart from this process's own output: each line the
server writes is copied to this process's stderr prefixed with ``[NAME] ``.

A server's banner ("Starting server...", log lines) would otherwise land unmarked in
the middle of what a CLI command prints. ``NAME`` is `server_name`: the program the
source runs (the script or module an interpreter runs, else the command's file name).

The child process needs a file descriptor for its stderr, so `prefixed_stderr` gives
it the write end of a pipe; a daemon thread reads the other end and writes each line
(at most `MAX_LINE_BYTES` at a time, decoded as UTF-8 with replacement characters) to
``sys.stderr`` as it is *at that moment* (a test runner's captured stream included).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import PurePath
from typing import BinaryIO, Final, TextIO

import anyio

__all__ = ["MAX_LINE_BYTES", "prefixed_stderr", "server_name"]

MAX_LINE_BYTES: Final = 8192  # a longer line is copied in pieces, each prefixed
# how long closing waits for the last lines (a grandchild may keep the pipe open longer)
_DRAIN_SECONDS: Final = 5.0
_INTERPRETER: Final = re.compile(r"(python[0-9.]*|node|nodejs|deno|bun|sh|bash|uv|uvx|npx)")


def server_name(command: str, args: Sequence[str]) -> str:
    """What the prefix calls a stdio server: for an interpreter (``python``, ``node``,
    ``npx``, ``uvx``, ...), the first argument that is not an option (a script's file
    name, or the module after ``-m``); else the command's file name."""
    program = PurePath(command).name or command
    if _INTERPRETER.fullmatch(program):
        words = list(args)
        for index, word in enumerate(words):
            if word == "-m" and index + 1 < len(words):
                return words[index + 1]
            if word in ("-c", "-e"):
                break  # inline code: the interpreter is all there is to name
            if not word.startswith("-"):
                return PurePath(word).name or word
    return program


def _pump(reader: BinaryIO, prefix: str) -> None:
    with reader:
        while chunk := reader.readline(MAX_LINE_BYTES):
            text = chunk.decode("utf-8", errors="replace").rstrip("\r\n")
            target = sys.stderr
            try:
                target.write(f"{prefix}{text}\n")
                target.flush()
            except (OSError, ValueError):  # our stderr is gone: keep draining the pipe
                continue


@contextlib.asynccontextmanager
async def prefixed_stderr(name: str) -> AsyncIterator[TextIO]:
    """A stream to give a child process as its stderr; see the module."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    writer = os.fdopen(write_fd, "w")
    pump = threading.Thread(
        target=_pump, args=(reader, f"[{name}] "), name=f"stderr of {name}", daemon=True
    )
    pump.start()
    try:
        yield writer
    finally:
        writer.close()  # the child's copy closes when it exits; then the pump ends
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(pump.join, _DRAIN_SECONDS)
