"""``flowledger web`` in a thread of the test process (`WebServer`, the class the CLI
runs), so a browser test can read what the server holds (its open live streams), and
the chromium fixture of those tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.web.server import WebServer

from .servers import APP, chromium

DEADLINE = 60.0  # only catches a hang


class Served:
    """``flowledger web`` (`WebServer`) on a free loopback port, in a thread of this
    process, so the test reads how many live streams it holds open."""

    def __init__(self, db: Path, tokens: dict[str, str] | None = None) -> None:
        self.server = WebServer(f"sqlite:///{db}", app=APP, port=0, tokens=tokens)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.error: BaseException | None = None

    def _serve(self) -> None:
        try:
            asyncio.run(self.server.run(ready=lambda _url: self._ready.set()))
        except BaseException as exc:  # reported by the test that waits for it
            self.error = exc
            self._ready.set()

    def __enter__(self) -> Served:
        self._thread.start()
        assert self._ready.wait(DEADLINE), "flowledger web did not start"
        assert self.error is None, self.error
        return self

    def __exit__(self, *_: object) -> None:
        self.server.stop()
        self._thread.join(DEADLINE)

    @property
    def url(self) -> str:
        return self.server.url

    def open_streams(self) -> int:
        assert self.server.dashboard is not None
        return self.server.dashboard.streams.open

    def settle(self, want: int) -> int:
        """The open streams once they are ``want`` (the browser closes a replaced stream
        a little after opening its successor), or the count at the deadline."""
        deadline = time.monotonic() + DEADLINE
        while (count := self.open_streams()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        return count


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield instance
        instance.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with Served(tmp_path / "served.db") as running:
        yield running
