"""A real ``flowledger web`` subprocess on a real SQLite file, and Debian's chromium.

Browser tests need the ``playwright`` Python package and ``/usr/bin/chromium`` (``.ci/run``
installs it with apt-get; no browser is ever downloaded). Without them the tests skip
with the reason, except when ``CI=true``: there they fail, so CI cannot pass without
running them.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
APP = "tests.web.web_app:catalog"
START_TIMEOUT = 60.0  # only catches a hang
_SERVING = re.compile(r"flowledger web: serving (http://\S+/)")


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} [CI=true: the browser tests must run]", pytrace=False)
    pytest.skip(reason)


def chromium() -> str:
    """The system chromium's path (skips, or fails on CI, without it or playwright)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        unavailable("chromium is not installed (apt-get install -y chromium)")
    return str(CHROMIUM)


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``flowledger ARGS --db DB --app APP`` as a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--db", f"sqlite:///{db}", "--app", APP],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )


@dataclass
class WebProcess:
    process: subprocess.Popen[str]
    url: str
    stderr: list[str]  # the lines it wrote so far (all of them once it exited)
    done: threading.Event


@contextmanager
def web_server(db: Path, *extra: str) -> Iterator[str]:
    """``flowledger web`` on a free loopback port; yields its base URL (ending in /)."""
    with web_process(db, *extra) as served:
        yield served.url


@contextmanager
def web_process(db: Path, *extra: str) -> Iterator[WebProcess]:
    """`web_server`, yielding the process and what it writes on stderr."""
    command: Sequence[str] = [
        sys.executable,
        "-m",
        "flowledger",
        "web",
        "--db",
        f"sqlite:///{db}",
        "--app",
        APP,
        "--port",
        "0",
        *extra,
    ]
    process = subprocess.Popen(
        command, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()
    collected: list[str] = []
    done = threading.Event()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)
        done.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        url = ""
        while not url:
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                pytest.fail("flowledger web did not start: " + "".join(collected))
            if line is None:
                pytest.fail("flowledger web exited: " + "".join(collected))
            collected.append(line)
            match = _SERVING.search(line)
            if match is not None:
                url = match.group(1)
        served = WebProcess(process, url, collected, done)

        def keep() -> None:
            while (line := lines.get()) is not None:
                collected.append(line)

        threading.Thread(target=keep, daemon=True).start()
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=START_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
