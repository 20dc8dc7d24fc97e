"""A running run moves on the dashboard while it runs (issue #31, item 2): its row in
the runs table (progress, Updated) and its page (progress, Revision, Updated) follow
each step without a reload. Debian's chromium through Playwright, against
``flowledger web`` on a real SQLite file; the run's steps wait for files the test
creates, so each state is seen while the run is still running."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses


def _facts(page: Any) -> dict[str, str]:
    """The run page's header facts: the label's text, Updated as its full timestamp."""
    return dict(
        page.evaluate(
            """() => Array.from(document.querySelectorAll('#header .facts > div')).map((d) => [
                d.querySelector('dt').textContent,
                d.querySelector('dd time')?.getAttribute('datetime')
                    ?? d.querySelector('dd').textContent.trim(),
            ])"""
        )
    )


def _row(page: Any, run_id: str) -> dict[str, str]:
    row = page.locator(f"tr[data-run='{run_id}']")
    times = row.locator("time")
    return {
        "status": row.locator(".status").inner_text(),
        "started": times.nth(0).get_attribute("datetime"),
        "updated": times.nth(1).get_attribute("datetime"),
        "progress": row.locator("td").last.inner_text().strip(),
    }


def test_a_running_run_moves_in_the_runs_table_and_on_its_page(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    context = browser.new_context()
    context.set_default_timeout(DEADLINE * 1000)
    gate = tmp_path / "gate"
    try:
        runs = context.new_page()
        runs.goto(served.url + "runs")
        runs.evaluate("window.__loaded = true")  # gone if the page reloads
        page = context.new_page()
        page.goto(served.url + "definitions/gates/v1")
        page.fill("#f-path", str(gate))
        page.click("#start-form button[type=submit]")
        page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
        run_id = page.url.rsplit("/", 1)[1]
        page.evaluate("window.__loaded = true")
        page.wait_for_selector("svg.graph .vertex[data-vertex='one'][data-state='running']")
        before = _facts(page)
        runs.wait_for_selector(f"tr[data-run='{run_id}'] .status-running")
        first = _row(runs, run_id)
        assert first["progress"] == "0/3", first

        Path(f"{gate}.1").touch()  # "one" completes; "two" is in flight: still running
        runs.wait_for_function(
            f"""() => document.querySelector("tr[data-run='{run_id}'] td:last-child")
                ?.textContent.includes("1/3")"""
        )
        moved = _row(runs, run_id)
        assert moved["status"] == "running", moved
        assert moved["updated"] > first["updated"], (first, moved)
        assert moved["started"] == first["started"]
        page.wait_for_function(
            """() => document.querySelector('#header .progress')?.textContent.includes('1/3')"""
        )
        after = _facts(page)
        assert after["Status"].startswith("running"), after
        assert int(after["Revision"]) > int(before["Revision"]), (before, after)
        assert after["Updated"] > before["Updated"], (before, after)
        assert runs.evaluate("window.__loaded") and page.evaluate("window.__loaded")

        Path(f"{gate}.2").touch()
        runs.wait_for_selector(f"tr[data-run='{run_id}'] .status-completed")
        page.wait_for_selector("#header .status-completed")
        done = _facts(page)
        assert int(done["Revision"]) > int(after["Revision"]) and done["Updated"] > after["Updated"]
        assert _row(runs, run_id)["progress"] == "3/3"
    finally:
        Path(f"{gate}.1").touch()
        Path(f"{gate}.2").touch()
        context.close()
