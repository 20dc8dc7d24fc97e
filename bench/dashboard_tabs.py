"""Open live streams per browser with ten dashboard tabs (issue #31, item 1).

Serves ``flowledger web`` (`WebServer`, in a thread of this process, on a fresh SQLite
file with one run) and opens --tabs tabs of the dashboard in one chromium context
(Debian's ``/usr/bin/chromium`` through Playwright), alternating the runs table and the
run's page, one after the other. Counts, once the tabs are open, the live streams the
server holds open (`Dashboard.streams`, counted where the response streams), and how
many tabs finished loading within --load-seconds each. Two modes:

* shared  - the page script as it ships: the tabs share one stream (a shared worker);
* per-tab - the same script in a browser without shared workers (``SharedWorker``
  deleted before any script runs): each tab opens its own stream, as every tab did
  before the shared stream.

    python bench/dashboard_tabs.py [--tabs 10] [--rounds 5] [--load-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from flowledger.web.server import WebServer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the test catalog: tests.web.web_app
APP = "tests.web.web_app:catalog"
SETTLE = 3.0  # seconds the stream count must stay put to be read


def serve(db: Path) -> tuple[WebServer, threading.Thread]:
    server = WebServer(f"sqlite:///{db}", app=APP, port=0)
    ready = threading.Event()
    thread = threading.Thread(
        target=lambda: asyncio.run(server.run(ready=lambda _url: ready.set())), daemon=True
    )
    thread.start()
    if not ready.wait(60):
        raise SystemExit("flowledger web did not start")
    return server, thread


def streams(server: WebServer) -> int:
    assert server.dashboard is not None
    return server.dashboard.streams.open


def steady(server: WebServer) -> int:
    """The open stream count once it stayed the same for `SETTLE` seconds."""
    last, since = streams(server), time.monotonic()
    while time.monotonic() - since < SETTLE:
        time.sleep(0.1)
        now = streams(server)
        if now != last:
            last, since = now, time.monotonic()
    return last


def one_round(
    browser: Any, server: WebServer, tabs: int, shared: bool, wait_ms: int, flag: Path
) -> tuple[int, int]:
    """One browser context: a waiting run started, then the tabs; its run ends after."""
    if steady(server) != 0:  # the previous round's browser context is gone, and its streams
        raise SystemExit("streams of a closed browser context stayed open")
    context = browser.new_context()
    context.set_default_timeout(60_000)  # only catches a hang
    if not shared:
        context.add_init_script("delete window.SharedWorker;")
    try:
        page = context.new_page()
        page.goto(server.url + "definitions/waiter/v1")
        page.fill("#f-path", str(flag))
        page.click("#start-form button[type=submit]")
        page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
        run_url = page.url
        page.close()
        loaded = 0
        opened = []
        for i in range(tabs):
            tab = context.new_page()
            opened.append(tab)
            try:
                tab.goto(server.url + "runs" if i % 2 == 0 else run_url, timeout=wait_ms)
                loaded += 1
            except Exception:  # the browser's connection limit: the tab never loads
                continue
        return steady(server), loaded
    finally:
        flag.touch()  # the round's run ends
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tabs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--modes", nargs="+", default=["per-tab", "shared"])
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        server, thread = serve(Path(tmp) / "tabs.db")
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox"]
        )
        try:
            print(f"{args.tabs} tabs, {args.rounds} rounds; open streams and tabs loaded")
            for mode in args.modes:
                counts, loads = [], []
                for i in range(args.rounds):
                    count, loaded = one_round(
                        browser,
                        server,
                        args.tabs,
                        mode == "shared",
                        int(args.load_seconds * 1000),
                        Path(tmp) / f"go-{mode}-{i}",
                    )
                    counts.append(count)
                    loads.append(loaded)
                print(
                    f"{mode:8} open streams median {statistics.median(counts)} "
                    f"(min {min(counts)}, max {max(counts)}); tabs loaded median "
                    f"{statistics.median(loads)} (min {min(loads)}, max {max(loads)})"
                )
        finally:
            browser.close()
            server.stop()
            thread.join(60)


if __name__ == "__main__":
    main()
