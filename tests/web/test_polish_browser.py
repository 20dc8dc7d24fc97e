"""What a real browser found confusing (issue #31, item 5), each checked in Debian's
chromium through Playwright against ``flowledger web`` on a real SQLite file: a long
state string on a 390 px wide screen, a cancel that asks first, choice fields without
JSON quotes, times that say their zone, and a favicon."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses

NARROW = 390


def _context(browser: Any, width: int = 1280) -> Any:
    context = browser.new_context(viewport={"width": width, "height": 800})
    context.set_default_timeout(DEADLINE * 1000)
    return context


def _start(page: Any, base: str, name: str, fields: dict[str, str]) -> str:
    page.goto(base + f"definitions/{name}/v1")
    for field, value in fields.items():
        page.fill(f"#f-{field}", value)
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    return str(page.url.rsplit("/", 1)[1])


def test_a_long_state_string_does_not_widen_a_narrow_screen(served: Served, browser: Any) -> None:
    context = _context(browser, NARROW)
    try:
        page = context.new_page()
        title = "x" * 200  # the longest title, one word
        run_id = _start(page, served.url, "document_review", {"title": title, "document": "Hi."})
        page.wait_for_selector("#header .status-interrupted")
        assert title in page.inner_text("#pause")
        for path in (f"runs/{run_id}", "runs", "definitions/document_review/v1"):
            page.goto(served.url + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= NARROW, (path, width)
    finally:
        context.close()


def test_cancel_asks_first(served: Served, browser: Any, tmp_path: Path) -> None:
    context = _context(browser)
    flag = tmp_path / "go"
    try:
        page = context.new_page()
        run_id = _start(page, served.url, "waiter", {"path": str(flag)})
        page.fill("#cancel-form input[name=reason]", "changed my mind")
        asked: list[str] = []

        def say_no(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.dismiss()

        page.once("dialog", say_no)
        page.click("#cancel-form button[type=submit]")
        assert asked and "Cancel run" in asked[0] and run_id[:8] in asked[0]
        page.reload()
        assert page.inner_text("#header .status") == "running"  # nothing was sent
        page.fill("#cancel-form input[name=reason]", "changed my mind")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#cancel-form button[type=submit]")
        page.wait_for_selector("#header .status-cancelled")
    finally:
        flag.touch()
        context.close()


def test_choices_times_and_favicon(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        page.goto(served.url + "definitions/kinds/v1")
        labels = page.eval_on_selector_all("#f-color option", "o => o.map(x => x.textContent)")
        assert labels == ["choose…", "red", "green"]
        page.select_option("#f-color", label="green")
        page.fill("#f-count", "1")
        page.click("#start-form button[type=submit]")
        page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
        page.wait_for_selector("#header .status-completed")
        # the server's UTC text is the hover text (and the page without script); the
        # local rendering is tests/web/test_time_browser.py's
        for text in page.eval_on_selector_all("main time", "t => t.map(x => x.title)"):
            assert text.endswith(" UTC"), text
        icon = page.get_attribute("link[rel=icon]", "href")
        assert icon is not None
        answer = page.request.get(served.url + icon.lstrip("/"))
        assert answer.status == 200 and answer.headers["content-type"].startswith("image/svg")
    finally:
        context.close()


def test_after_a_refused_post_the_address_is_the_page(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        page.goto(served.url + "definitions/kinds/v1")
        page.evaluate("document.querySelector('#start-form').noValidate = true")
        page.fill("#f-count", "99")  # beyond the schema's maximum: the server refuses it
        page.click("#start-form button[type=submit]")
        page.wait_for_selector("#form-error")
        assert "count" in page.inner_text("#form-error")
        assert page.url == served.url + "definitions/kinds/v1"
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.method))
        reloaded = page.reload()
        assert reloaded is not None and reloaded.status == 200
        assert requests[0] == "GET" and page.query_selector("#form-error") is None
        # a new tab on an action's address gets its page, not "Method Not Allowed"
        tab = context.new_page()
        for action, landing in (
            ("definitions/kinds/v1/start", "definitions/kinds/v1"),
            ("runs/00000000-0000-4000-8000-000000000001/cancel", None),
        ):
            answer = tab.goto(served.url + action)
            assert answer is not None
            if landing is None:  # no such run: the run page's own 404
                assert answer.status == 404 and "Method Not Allowed" not in tab.content()
            else:
                assert answer.status == 200 and tab.url == served.url + landing
        page.goto(served.url + "runs")
        assert page.query_selector("tr[data-run]") is None  # nothing was started
    finally:
        context.close()


def test_vertex_states_are_signs_not_colour_alone(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    context = _context(browser)
    flag = tmp_path / "go"
    try:
        page = context.new_page()
        _start(page, served.url, "waiter", {"path": str(flag)})
        mark = "svg.graph .vertex[data-vertex='{}'] text.mark"
        page.wait_for_selector("svg.graph .vertex[data-vertex='wait'][data-state='running']")
        assert page.text_content(mark.format("wait")) == "▶"
        assert page.text_content(mark.format("after")) == ""
        dash = page.eval_on_selector(
            "svg.graph .vertex[data-vertex='after'] rect",
            "r => getComputedStyle(r).strokeDasharray",
        )
        assert dash not in ("", "none")  # not reached: a dashed outline, whatever the colour
        legend = page.inner_text("ul.legend")
        for sign in ("▶", "✓", "‖", "✗"):
            assert sign in legend
        flag.touch()  # the signs follow the run live
        page.wait_for_selector("#header .status-completed")
        page.wait_for_function(
            f"""() => document.querySelector("{mark.format("after")}").textContent === "✓"
                && document.querySelector("{mark.format("wait")}").textContent === "✓" """
        )
    finally:
        flag.touch()
        context.close()
