"""Ten dashboard tabs in one browser (issue #31, item 1): a browser holds at most six
HTTP/1.1 connections per host, so with a live stream per tab the seventh tab never
loaded. The tabs share one stream (`flowledger.web.mux`, through the page script's
shared worker), counted where the server holds it: `WebServer` runs in this process,
on a real SQLite file, and Debian's chromium drives it through Playwright."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

TABS = 10
__all__ = ["browser", "served"]  # the fixtures this module uses


def _start_waiter(page: Any, base: str, flag: Path) -> str:
    page.goto(base + "definitions/waiter/v1")
    page.fill("#f-path", str(flag))
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    return str(page.url.rsplit("/", 1)[1])


def test_ten_tabs_load_and_go_live_over_one_stream(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    context = browser.new_context()
    context.set_default_timeout(DEADLINE * 1000)
    try:
        flag = tmp_path / "go"
        starter = context.new_page()
        run_id = _start_waiter(starter, served.url, flag)
        starter.close()
        tabs = []
        for i in range(TABS):  # half the runs table, half the run's page
            tab = context.new_page()
            tab.goto(served.url + ("runs" if i % 2 == 0 else f"runs/{run_id}"))
            tabs.append(tab)
        for tab in tabs:  # every tab loaded, script included
            tab.wait_for_load_state("load")
        # the runs tables: a run started now appears in each of them, live
        later = context.new_page()
        second = _start_waiter(later, served.url, flag)
        later.close()
        for tab in tabs[::2]:
            tab.wait_for_selector(f"tr[data-run='{second}']")
        # the run's pages: the run finishing reaches each of them, live
        flag.touch()
        for tab in tabs[1::2]:
            tab.wait_for_selector("#header .status-completed")
        for tab in tabs[::2]:
            tab.wait_for_selector(f"tr[data-run='{run_id}'] .status-completed")
        assert served.settle(1) == 1
    finally:
        context.close()
    assert served.settle(0) == 0  # the browser gone, its stream is closed


def test_a_browser_without_shared_workers_opens_a_stream_per_tab(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    """The fallback: each page its own stream, as before (a few tabs)."""
    context = browser.new_context()
    context.set_default_timeout(DEADLINE * 1000)
    context.add_init_script("delete window.SharedWorker;")
    try:
        tabs = [context.new_page() for _ in range(3)]
        for tab in tabs:
            tab.goto(served.url + "runs")
        assert served.settle(3) == 3
        later = context.new_page()
        flag = tmp_path / "go"
        second = _start_waiter(later, served.url, flag)
        later.close()
        for tab in tabs:
            tab.wait_for_selector(f"tr[data-run='{second}']")
        flag.touch()  # the run ends: the server stops without waiting for it
        for tab in tabs:
            tab.wait_for_selector(f"tr[data-run='{second}'] .status-completed")
    finally:
        context.close()
