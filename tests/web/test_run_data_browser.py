"""A run's data on its page (issue #31, "the run's data"), in Debian's chromium through
Playwright against ``flowledger web`` on a real SQLite file: the state at any revision
diffed against the previous one, the input and the output, who answered the pause and
with what, and an error with its traceback - all of it shown as text, never as markup,
and reached with the keyboard."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses

TITLE = "Q4 <script>window.owned = 1</script>"
NOTE = "ship it <img src=x onerror='window.owned = 2'>"


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


def _unfold(page: Any, selector: str) -> None:
    """Open the folded values under ``selector`` as a reader does (a click on each)."""
    summaries = page.locator(f"{selector} details:not([open]) > summary")
    for index in range(summaries.count()):
        summaries.nth(index).click()


def _not_owned(page: Any) -> None:
    assert page.evaluate("window.owned") is None
    assert page.locator("main script, main img").count() == 0


def test_the_state_diff_input_output_and_who_answered(served: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        run_id = _start(
            page, served.url, "document_review", {"title": TITLE, "document": "Costs fell."}
        )
        page.wait_for_selector("#header .status-interrupted")
        page.select_option("#f-approved", "true")
        page.fill("#f-note", NOTE)
        page.click("#resume-form button[type=submit]")
        page.wait_for_selector("#header .status-completed")
        page.reload()  # the run page lists who answered its pause
        assert page.inner_text("#answers .answer-transport") == "this dashboard"

        # the run page's picker, with the keyboard: the revision, then Enter
        page.focus("#data-revision-pick")
        page.keyboard.press("Control+A")
        page.keyboard.type("1")
        page.keyboard.press("Enter")
        page.wait_for_selector("#data-revision:text-is('1')")
        page.click(f"h1 a[href='/runs/{run_id}']")
        page.click("#data-latest")
        page.wait_for_url(re.compile(rf"/runs/{run_id}/data$"))
        _unfold(page, "#input")
        _unfold(page, "#output")
        assert TITLE in page.inner_text("#input")
        assert '"published": true' in page.inner_text("#output")  # the final state: published
        row = page.locator("#answers tbody tr")
        assert row.count() == 1
        assert row.locator(".answer-kind").inner_text() == "an answer"
        assert row.locator(".answer-transport").inner_text() == "this dashboard"
        _unfold(page, "#answers")
        assert NOTE in row.locator(".answer-payload").inner_text()
        _not_owned(page)

        # the pause's revision, then forward until the answer lands in the state
        paused = int(str(row.get_attribute("data-revision")))
        row.locator("a").click()
        page.wait_for_selector(f"#data-revision:text-is('{paused}')")
        for _ in range(10):
            if page.locator("#changes tr[data-path='/approved']").count():
                break
            page.click("#revision-next")
            page.wait_for_load_state()
        change = page.locator("#changes tr[data-path='/approved']")
        assert change.get_attribute("class") == "diff-changed"
        assert change.locator("td").nth(2).inner_text() == "null"
        assert change.locator("td").nth(3).inner_text() == "true"
        note = page.locator("#changes tr[data-path='/reviewer_note']")
        _unfold(page, "#changes")
        assert NOTE in note.inner_text()
        _not_owned(page)

        # the picker, with the keyboard only: revision 0 is the first state
        page.focus("#revision")
        page.keyboard.press("Control+A")
        page.keyboard.type("0")
        page.keyboard.press("Enter")
        page.wait_for_selector("#data-revision:text-is('0')")
        assert page.locator("#revision-previous").count() == 0
        title_row = page.locator("#changes tr[data-path='/title']")
        _unfold(page, "#changes")
        assert title_row.get_attribute("class") == "diff-added"
        assert TITLE in title_row.inner_text()
        _not_owned(page)
    finally:
        context.close()


def test_an_error_shows_its_type_message_and_traceback(served: Served, browser: Any) -> None:
    context = _context(browser)
    text = "<b>loud</b> & clear"
    try:
        page = context.new_page()
        _start(page, served.url, "shout", {"text": text})
        page.wait_for_selector("#header [data-pause='error']")
        page.click("#data-latest")
        errors = page.locator("#errors")
        assert errors.locator(".error-type").inner_text() == "ValueError"
        assert errors.locator(".error-message").inner_text() == f"cannot shout {text}"
        page.click("#errors details.traceback summary")
        trace = errors.locator("details.traceback pre").inner_text()
        assert trace.startswith("Traceback (most recent call last):")
        assert 'raise ValueError(f"cannot shout {state.text}")' in trace
        assert trace.rstrip().endswith(f"ValueError: cannot shout {text}")
        assert page.locator("main b").count() == 0
    finally:
        context.close()


def test_a_narrow_viewport_keeps_a_long_state_inside_the_page(served: Served, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 800})
    context.set_default_timeout(DEADLINE * 1000)
    try:
        page = context.new_page()
        run_id = _start(page, served.url, "shout", {"text": "x" * 200})
        page.goto(served.url + f"runs/{run_id}/data?revision=0")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
    finally:
        context.close()
