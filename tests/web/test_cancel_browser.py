"""A cancelled run's page (issue #31, item 5), in Debian's chromium through Playwright
against ``flowledger web`` on a real SQLite file: the reason given is shown (as text,
never as markup), and the vertex the cancel interrupted reads cancelled, not "not
reached"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses

REASON = "wrong input <b>again</b> & again"


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


def _cancel(page: Any, reason: str) -> None:
    page.fill("#cancel-form input[name=reason]", reason)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-form button[type=submit]")
    page.wait_for_selector("#header .status-cancelled")


def _state(page: Any, vertex: str) -> tuple[str, str]:
    node = page.locator(f"svg.graph .vertex[data-vertex='{vertex}']")
    return str(node.get_attribute("data-state")), str(node.locator("text.mark").text_content())


def test_a_cancel_in_flight_shows_its_reason_and_the_step_it_cut(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    context = _context(browser)
    flag = tmp_path / "go"
    try:
        page = context.new_page()
        _start(page, served.url, "waiter", {"path": str(flag)})
        page.wait_for_selector("svg.graph .vertex[data-vertex='wait'][data-state='running']")
        _cancel(page, REASON)
        page.wait_for_selector("#cancel-reason")
        for _ in range(2):  # live, then from a fresh load
            assert page.inner_text("#cancel-reason") == REASON
            assert page.locator("#cancel-reason b").count() == 0
            assert _state(page, "wait") == ("cancelled", "■")
            assert _state(page, "after") == ("not_reached", "")
            page.reload()
    finally:
        flag.touch()
        context.close()


def test_a_cancelled_pause_reads_cancelled(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        fields = {"title": "Q4", "document": "Costs fell."}
        _start(page, served.url, "document_review", fields)
        page.wait_for_selector("#header .status-interrupted")
        paused = page.get_attribute("svg.graph .vertex[data-state='paused']", "data-vertex")
        assert paused
        _cancel(page, "no longer needed")
        page.reload()
        assert page.inner_text("#cancel-reason") == "no longer needed"
        assert _state(page, paused) == ("cancelled", "■")
        assert "cancelled" in page.inner_text(".legend")
    finally:
        context.close()
