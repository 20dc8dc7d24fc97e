"""Queued runs and the queues panel (issue #28, item 4), in Debian's chromium through
Playwright against ``flowledger web`` on a real SQLite file: the runs list shows a
queued run with its scope and position, and the Schedules page's panel shows each limit
with its running and queued counts, and a source's call rate limit."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy.registry.rates import RateLimits
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from flowledger.workflows.admission import Limits

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses


def limit(db: Path) -> None:
    """At most one document_review running; the paid source at most 5 calls a minute."""

    async def write() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            await Limits(store.kv).set("definition", "document_review", 1)
            registry = SourceRegistry.over(store)
            await registry.add(
                {
                    "format": "flowledger.source/v1",
                    "name": "paid",
                    "stdio": {"command": sys.executable, "args": ["-m", "http.server"]},
                }
            )
            await RateLimits(registry).set("paid", 5, "1m")

    # Playwright's sync API runs an event loop in this thread: write from another one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result(DEADLINE)


def _review(page: Any, base: str, title: str) -> str:
    page.goto(base + "definitions/document_review/v1")
    page.fill("#f-title", title)
    page.fill("#f-document", "Sales grew.")
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    return str(page.url.rsplit("/", 1)[1])


def _until(page: Any, url: str, selector: str) -> None:
    """Reload ``url`` until ``selector`` is on it (the owner queues runs as it polls)."""
    deadline = time.monotonic() + DEADLINE  # only catches a hang
    while True:
        page.goto(url)
        if page.locator(selector).count():
            return
        assert time.monotonic() < deadline, f"{selector} never appeared on {url}"
        time.sleep(0.2)


def test_queued_runs_show_their_place_and_the_panel_counts_them(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    limit(tmp_path / "served.db")  # the database the `served` fixture serves
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(DEADLINE * 1000)
    try:
        page = context.new_page()
        first = _review(page, served.url, "holds the slot")  # pauses for approval
        page.wait_for_selector("#header .status-interrupted")
        second = _review(page, served.url, "second in line")
        third = _review(page, served.url, "third in line")

        _until(page, served.url + "runs", f"tr[data-run='{third}'] .queued")
        assert page.locator(f"tr[data-run='{first}'] .queued").count() == 0
        second_place = page.inner_text(f"tr[data-run='{second}'] .queued")
        assert second_place == "queued #1 in definition/document_review"
        assert page.inner_text(f"tr[data-run='{third}'] .queued") == (
            "queued #2 in definition/document_review"
        )

        # the runs filter has the CLI's and the tool's "queued", and a count that links to it
        page.select_option("select[name=status]", "queued")
        page.click(".filters button[type=submit]")
        page.wait_for_url(re.compile(r"status=queued"))
        listed = page.eval_on_selector_all(
            "#runs tbody tr[data-run]", "rs => rs.map(r => r.dataset.run)"
        )
        assert sorted(listed) == sorted([second, third])
        count = page.locator("#counts a[data-status='queued']")
        assert count.get_attribute("aria-current") == "true"
        assert count.locator("strong").inner_text() == "2"
        assert page.inner_text("#counts a[data-status='pending'] strong") == "2"

        page.goto(served.url + "schedules")
        row = "#queues tr[data-scope='definition/document_review']"
        assert page.inner_text(f"{row} .queue-running") == "1"
        assert page.inner_text(f"{row} .queue-queued") == "2"
        rate = "#queues tr[data-scope='source/paid']"
        assert "at most 5 calls per 60s" in page.inner_text(rate)
        assert page.inner_text(f"{rate} .rate-in-window") == "0 in window"
        page.click(f"{row} .queue-queued a")  # the queued runs of that definition
        page.wait_for_url(re.compile(r"status=queued&definition=document_review"))
        assert page.locator("#runs tbody tr[data-run]").count() == 2
    finally:
        context.close()
