""" "Fork from here" means what it says (issue #31, item 4): a fork from a timeline row
continues *after* that row's step, so the step on the row is not run again; the fork
page says exactly which steps run again and asks before running them; the CLI's
``--patch`` is offered in the form, and every bad input is named and writes nothing.
The tool is not idempotent (``tally``: each call appends a line to a file), so the test
counts its calls. Debian's chromium through Playwright against ``flowledger web``."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses


def _calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _run_ids(page: Any) -> list[str]:
    page.goto(page.url.split("/runs", 1)[0] + "/runs")
    return list(page.eval_on_selector_all("tr[data-run]", "rows => rows.map(r => r.dataset.run)"))


def _completed_run(page: Any, base: str, counter: Path) -> str:
    page.goto(base + "definitions/tally/v1")
    page.fill("#f-path", str(counter))
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    page.wait_for_selector("#header .status-completed")
    return str(page.url.rsplit("/", 1)[1])


def test_a_fork_from_a_step_continues_after_it(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    counter = tmp_path / "calls"
    context = browser.new_context()
    context.set_default_timeout(DEADLINE * 1000)
    try:
        page = context.new_page()
        origin = _completed_run(page, served.url, counter)
        assert len(_calls(counter)) == 1
        row = "#timeline tr:has(.kind-vertex_completed):has-text('Call the tool')"
        page.click(f"{row} a.fork")
        page.wait_for_url(re.compile(rf"/runs/{origin}/fork\?revision=\d+$"))
        # what runs again is said, by label: "End", not the step on the row
        again = page.inner_text("#fork-again")
        assert "End" in again and "Call the tool" not in again
        assert page.is_visible("#f-confirm")
        page.fill("#f-patch", '{"note": "patched"}')
        page.check("#f-confirm")
        page.click("#fork-form button[type=submit]")
        page.wait_for_url(re.compile(r"/runs/(?!" + origin + r")[0-9a-f-]{36}$"))
        page.wait_for_selector("#header .status-completed")
        assert origin[:8] in page.inner_text("#forked-from")
        assert _calls(counter) == ["called "]  # the tool was not called again
        # the step the fork inherited finished shows finished, not "not reached"
        page.wait_for_selector("svg.graph .vertex[data-vertex='call'][data-state='done']")
        page.wait_for_selector("svg.graph .vertex[data-vertex='end'][data-state='done']")
        page.reload()
        page.wait_for_selector("svg.graph .vertex[data-vertex='call'][data-state='done']")

        # from the run's start, the tool runs again: the page says so, and the fork does it
        page.goto(served.url + f"runs/{origin}")
        page.click("#timeline tr:has(.kind-run_started) a.fork")
        assert "Call the tool" in page.inner_text("#fork-again")
        page.fill("#f-patch", '{"note": "again"}')
        page.check("#f-confirm")
        page.click("#fork-form button[type=submit]")
        page.wait_for_url(re.compile(r"/runs/(?!" + origin + r")[0-9a-f-]{36}$"))
        page.wait_for_selector("#header .status-completed")
        assert _calls(counter) == ["called ", "called again"]
    finally:
        context.close()


def test_a_fork_form_names_what_is_wrong_and_forks_nothing(
    served: Served, browser: Any, tmp_path: Path
) -> None:
    counter = tmp_path / "calls"
    context = browser.new_context()
    context.set_default_timeout(DEADLINE * 1000)
    try:
        page = context.new_page()
        origin = _completed_run(page, served.url, counter)
        page.click("#timeline tr:has(.kind-run_started) a.fork")
        form = page.url
        token = page.get_attribute("#fork-form input[name=csrf]", "value")
        revision = page.get_attribute("#fork-form input[name=revision]", "value")
        before = _run_ids(page)
        cases = [
            ({}, "confirm: steps that already ran run again"),
            ({"confirm": "yes", "patch": "{note"}, "patch: not valid JSON"),
            ({"confirm": "yes", "patch": "[1]"}, "patch: must be a JSON object"),
            ({"confirm": "yes", "patch": '{"nope": 1}'}, "state field 'nope'"),
            ({"confirm": "yes", "patch": '{"note": 3}'}, "state field 'note'"),
        ]
        for fields, said in cases:
            answer = page.request.post(
                served.url + f"runs/{origin}/fork",
                form={"csrf": str(token), "revision": str(revision), **fields},
            )
            assert answer.status == 400, (fields, answer.status)
            assert said in html.unescape(answer.text()), (fields, answer.text())
            assert 'id="fork-form"' in answer.text()  # the form again, with the error
        forged = page.request.post(
            served.url + f"runs/{origin}/fork", form={"revision": "0", "confirm": "yes"}
        )
        assert forged.status == 403
        assert page.request.get(served.url + f"runs/{origin}/fork?revision=x").status == 400
        beyond = page.request.get(served.url + f"runs/{origin}/fork?revision=999")
        assert beyond.status == 400 and "invalid fork revision" in html.unescape(beyond.text())
        page.goto(form)
        assert _run_ids(page) == before  # nothing was forked
        assert len(_calls(counter)) == 1
    finally:
        context.close()
