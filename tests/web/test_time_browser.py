"""Time on the dashboard and keyboard-only use of its forms (issue #31), in Debian's
chromium through Playwright against ``flowledger web`` on a real SQLite file:

* times read in the browser's zone (here Asia/Tokyo), named, with how long ago, and
  the server's UTC text on hover; the run page's duration links to the run's time page,
  whose Gantt draws a bar per execution with its attempts; the runs list has duration
  and "paused by" columns;
* every form a run's life goes through is used with the keyboard only (Tab to reach a
  field or button, typing, Space to tick, Enter to submit): the runs filter, a start
  form, a resume form, a retry, a cancel (its confirmation dialog accepted), a fork with
  its confirmation box, and a bulk cancel with its confirmation page; the sign-in form
  (a wrong token, then the right one) and a deployed run's Revalidate.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowledger.web.server import WebServer

from .deployed import SECRET_NAME, SECRET_VALUE, paused_deployed_run
from .inprocess import DEADLINE, Served, browser

pytestmark = pytest.mark.slow

__all__ = ["browser"]  # the fixture this module uses

TIMED_APP = "tests.web.timed_app:catalog"


class _Timed(Served):
    """`Served` with the time tests' catalog (`timed_app`)."""

    def __init__(self, db: Path) -> None:
        super().__init__(db)
        self.server = WebServer(f"sqlite:///{db}", app=TIMED_APP, port=0)


@pytest.fixture
def timed(tmp_path: Path) -> Iterator[Served]:
    with _Timed(tmp_path / "timed.db") as running:
        yield running


def _context(browser: Any, **options: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
    context.set_default_timeout(DEADLINE * 1000)
    return context


def _tab_to(page: Any, selector: str, *, limit: int = 120) -> None:
    """Tab until ``selector`` has the focus (no mouse: what a keyboard user does)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement?.matches(s) ?? false", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def _start_by_keyboard(page: Any, base: str, name: str, fields: dict[str, str]) -> str:
    page.goto(base + f"definitions/{name}/v1")
    for field, value in fields.items():
        _tab_to(page, f"#f-{field}")
        page.keyboard.type(value)
    _tab_to(page, "#start-form button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    return str(page.url.rsplit("/", 1)[1])


def test_times_read_local_and_the_time_page_draws_attempts(timed: Served, browser: Any) -> None:
    context = _context(browser, timezone_id="Asia/Tokyo", locale="en-US")
    try:
        page = context.new_page()
        run_id = _start_by_keyboard(page, timed.url, "retrying", {"title": "tokyo"})
        page.wait_for_selector("#header .status-completed")
        started = page.locator("#header time").first
        page.wait_for_function(
            "() => document.querySelector('#header time')?.dataset.local === '1'"
        )
        utc_text = str(started.get_attribute("title"))
        assert utc_text.endswith(" UTC"), utc_text
        shown = started.inner_text()
        assert "GMT+9" in shown and ("ago" in shown or "now" in shown), shown
        instant = datetime.fromisoformat(str(started.get_attribute("datetime")))
        tokyo = instant + timedelta(hours=9)
        assert f"{tokyo:%b} {tokyo.day}, {tokyo.year}" in shown, shown
        assert f"{tokyo.hour % 12 or 12}:{tokyo:%M}:" in shown, shown
        assert "timeline" in page.inner_text("#duration")

        page.click("#time-link")
        page.wait_for_url(re.compile(rf"/runs/{run_id}/time$"))
        bars = page.locator("svg.gantt rect.bar")
        assert bars.count() == 2
        shaky = page.locator("svg.gantt rect.bar[data-vertex='shaky']")
        assert shaky.get_attribute("data-attempts") == "3"
        assert shaky.get_attribute("data-state") == "done"
        assert "3 attempts" in str(shaky.locator("title").text_content())
        box = shaky.bounding_box()
        assert box is not None and box["width"] > 0
        cells = page.locator("#vertex-times tr[data-vertex='shaky'] td").all_inner_texts()
        assert cells[1:4] == ["1", "3", "2"], cells  # executions, attempts, retries

        page.goto(timed.url + "runs")
        row = page.locator(f"tr[data-run='{run_id}']")
        assert re.fullmatch(r"[\d.]+ (ms|s)|\d+ min \d+ s", row.locator("td.duration").inner_text())
        assert row.locator("td.paused-by").inner_text().strip() == "\u2013"  # nothing
    finally:
        context.close()


def test_every_run_form_works_from_the_keyboard(timed: Served, browser: Any) -> None:
    context = _context(browser)
    try:
        page = context.new_page()
        base = timed.url
        # start (typing in the fields), then resume with a boolean chosen by typing "y"
        paused = _start_by_keyboard(
            page, base, "document_review", {"title": "Keys", "document": "Typed."}
        )
        page.wait_for_selector("#resume-form")
        _tab_to(page, "#f-approved")
        page.keyboard.type("y")
        assert page.input_value("#f-approved") == "true"
        _tab_to(page, "#resume-form button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_selector("#header .status-completed")

        # an errored pause retried from its button
        erring = _start_by_keyboard(page, base, "flaky", {"title": "keys-retry"})
        page.wait_for_selector("#header [data-pause='error']")
        _tab_to(page, f"form[action='/runs/{erring}/retry'] button")
        page.keyboard.press("Enter")
        page.wait_for_selector("#header .status-completed")

        # a fork of it after its first step: the confirmation box ticked with Space
        page.goto(base + f"runs/{erring}")
        _tab_to(page, "a.fork")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"/fork\?revision=\d+$"))
        _tab_to(page, "#fork-form button[type=submit]")
        page.keyboard.press("Enter")  # not confirmed: the browser asks for the box
        assert page.url.endswith(tuple("0123456789"))  # still the fork page
        _tab_to(page, "#f-confirm")
        page.keyboard.press("Space")
        assert page.is_checked("#f-confirm")
        _tab_to(page, "#fork-form button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_selector("#forked-from")

        # a cancel: reason typed, Enter, the confirmation dialog accepted
        _start_by_keyboard(page, base, "document_review", {"title": "Stop", "document": "Me."})
        page.wait_for_selector("#resume-form")
        _tab_to(page, "#cancel-form input[name=reason]")
        page.keyboard.type("typed reason")
        page.once("dialog", lambda dialog: dialog.accept())
        page.keyboard.press("Enter")
        page.wait_for_selector("#cancel-reason")
        assert page.inner_text("#cancel-reason") == "typed reason"

        # the runs filter: a status chosen by typing, Enter
        page.goto(base + "runs")
        _tab_to(page, "select[name=status]")
        page.keyboard.type("cancelled")
        _tab_to(page, ".filters button[type=submit]")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"status=cancelled"))
        assert page.locator("#runs tbody tr").count() == 1

        # a bulk cancel: two rows ticked with Space, the button, the confirmation page
        one = _start_by_keyboard(page, base, "document_review", {"title": "B1", "document": "x"})
        page.wait_for_selector("#resume-form")
        two = _start_by_keyboard(page, base, "document_review", {"title": "B2", "document": "y"})
        page.wait_for_selector("#resume-form")
        page.goto(base + "runs")
        for run_id in (one, two):
            _tab_to(page, f"input[type=checkbox][value='{run_id}']")
            page.keyboard.press("Space")
        _tab_to(page, "#bulk-cancel")
        page.keyboard.press("Enter")
        page.wait_for_selector("#bulk-confirm")
        assert page.locator("#bulk-plan tr[data-applies='yes']").count() == 2
        _tab_to(page, "#f-reason")
        page.keyboard.type("bulk by keys")
        _tab_to(page, "#bulk-go")
        page.keyboard.press("Enter")
        page.wait_for_selector("#bulk-report")
        assert "/runs/bulk/done?" in page.url
        outcomes = page.eval_on_selector_all(
            "#bulk-report tr[data-run]", "rows => rows.map(r => r.dataset.outcome)"
        )
        assert outcomes == ["cancelled", "cancelled"]
        page.reload()  # the report again: nothing is posted twice
        assert page.locator("#bulk-report .status-cancelled").count() == 2
        assert paused != one != two
    finally:
        context.close()


def test_signing_in_works_from_the_keyboard(browser: Any, tmp_path: Path) -> None:
    token = "keys-only-token-0123456789"
    with Served(tmp_path / "signin.db", tokens={token: str(uuid.uuid4())}) as signed:
        context = _context(browser)
        try:
            page = context.new_page()
            page.goto(signed.url + "runs")
            assert page.url.endswith("/login")
            _tab_to(page, "#token")
            page.keyboard.type("not-the-token-0000000000")
            page.keyboard.press("Enter")  # Enter in the field submits the form
            page.wait_for_selector("#form-error")
            assert "unknown token" in page.inner_text("#form-error")
            _tab_to(page, "#token")
            page.keyboard.press("Control+A")
            page.keyboard.type(token)
            _tab_to(page, "#login-form button[type=submit]")
            page.keyboard.press("Enter")
            page.wait_for_url(signed.url + "runs")
            assert page.locator("#login-form").count() == 0  # signed in: the runs page
            assert page.locator("select[name=status]").count() == 1
        finally:
            context.close()


def test_revalidating_works_from_the_keyboard(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_NAME, SECRET_VALUE)  # the CLI and the server both read it
    db = tmp_path / "deployed.db"
    run_id = paused_deployed_run(db)
    with Served(db) as deployed:
        context = _context(browser)
        try:
            page = context.new_page()
            page.goto(deployed.url + f"runs/{run_id}")
            assert "sources were not contacted" in page.inner_text("#readiness")
            _tab_to(page, "#revalidate-form button[type=submit]")
            page.keyboard.press("Enter")
            page.wait_for_selector("#readiness :text('revalidated against the pinned sources')")
            assert page.inner_text("#readiness-status") == "ready"
        finally:
            context.close()
