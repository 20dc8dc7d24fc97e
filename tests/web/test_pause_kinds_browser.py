"""Error pauses told apart from approvals (issue #31, item 5), in Debian's chromium
through Playwright against ``flowledger web`` on a real SQLite file: the sign and words
of each pause kind on the runs list and the run page, the status filter that lists one
kind (and keeps the other out of its live table), and the counts by status."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses


def _context(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(DEADLINE * 1000)
    return context


def _start(page: Any, base: str, name: str, fields: dict[str, str]) -> str:
    page.goto(base + f"definitions/{name}/v1")
    for field, value in fields.items():
        page.fill(f"#f-{field}", value)
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    return str(page.url.rsplit("/", 1)[1])


def _review(page: Any, base: str) -> str:
    return _start(page, base, "document_review", {"title": "Q3", "document": "Sales grew."})


def test_an_error_pause_reads_apart_from_a_request(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        errored = _start(page, served.url, "flaky", {"title": "kinds-apart"})
        page.wait_for_selector("#header .status-interrupted[data-pause='error']")
        assert page.inner_text("#header .status") == "⚠ interrupted: error"
        asked = _review(page, served.url)
        page.wait_for_selector("#header .status-interrupted[data-pause='request']")
        assert page.inner_text("#header .status") == "‖ interrupted: awaiting input"
        page.goto(served.url + "runs")
        assert page.inner_text(f"tr[data-run='{errored}'] .status") == "⚠ interrupted: error"
        asked_sign = page.inner_text(f"tr[data-run='{asked}'] .status")
        assert asked_sign == "‖ interrupted: awaiting input"
        # not by colour alone, but not the same colour either
        colour = "el => getComputedStyle(el).backgroundColor"
        assert page.eval_on_selector(
            f"tr[data-run='{errored}'] .status", colour
        ) != page.eval_on_selector(f"tr[data-run='{asked}'] .status", colour)
    finally:
        context.close()


def test_the_status_filter_lists_one_pause_kind_live(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        starter = context.new_page()
        errored = _start(starter, served.url, "flaky", {"title": "filter-one"})
        starter.wait_for_selector("#header .status-interrupted[data-pause='error']")
        asked = _review(starter, served.url)
        starter.wait_for_selector("#header .status-interrupted[data-pause='request']")

        page = context.new_page()
        page.goto(served.url + "runs")
        page.select_option("select[name=status]", "interrupted:error")
        page.click(".filters button[type=submit]")
        page.wait_for_url(re.compile(r"status=interrupted%3Aerror"))
        assert page.locator(f"tr[data-run='{errored}']").count() == 1
        assert page.locator(f"tr[data-run='{asked}']").count() == 0
        # runs that pause later reach the open table only if they pause the same way
        later_asked = _review(starter, served.url)
        starter.wait_for_selector("#header .status-interrupted[data-pause='request']")
        later_errored = _start(starter, served.url, "flaky", {"title": "filter-two"})
        page.wait_for_selector(f"tr[data-run='{later_errored}'] .status[data-pause='error']")
        assert page.locator(f"tr[data-run='{later_asked}']").count() == 0

        page.goto(served.url + "runs?status=interrupted:request")
        shown = set(page.eval_on_selector_all("tr[data-run]", "rs => rs.map(r => r.dataset.run)"))
        assert shown == {asked, later_asked}
    finally:
        context.close()


def test_counts_by_status_link_to_their_filter(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        _start(page, served.url, "flaky", {"title": "count-one"})
        page.wait_for_selector("#header .status-interrupted[data-pause='error']")
        for _ in range(2):
            _review(page, served.url)
            page.wait_for_selector("#header .status-interrupted[data-pause='request']")
        page.goto(served.url + "runs")
        counts = {
            link.get_attribute("data-status"): link.inner_text()
            for link in page.locator("#counts a").all()
        }
        assert counts == {
            "pending": "pending 0",
            "queued": "pending: queued for a slot 0",
            "running": "running 0",
            "interrupted:request": "interrupted: awaiting input 2",
            "interrupted:error": "interrupted: error 1",
        }
        page.click("#counts a[data-status='interrupted:error']")
        page.wait_for_url(re.compile(r"status=interrupted%3Aerror"))
        assert page.locator("tr[data-run]").count() == 1
        assert page.locator("select[name=status]").input_value() == "interrupted:error"
    finally:
        context.close()
