"""Generated forms as a person meets them (issue #31, item 5), in Debian's chromium
through Playwright against ``flowledger web`` on a real SQLite file: required fields
first, a hint on a JSON field, one line for a plain string, an enum's default chosen, and
every field the server cannot read named at once."""

from __future__ import annotations

from typing import Any

import pytest

from .inprocess import DEADLINE, Served, browser, served

pytestmark = pytest.mark.slow

__all__ = ["browser", "served"]  # the fixtures this module uses


def _page(browser: Any) -> tuple[Any, Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(DEADLINE * 1000)
    return context, context.new_page()


def test_the_start_form_reads_in_order_with_hints_and_defaults(
    served: Served, browser: Any
) -> None:
    context, page = _page(browser)
    try:
        page.goto(served.url + "definitions/kinds/v1")
        names = page.eval_on_selector_all(
            "#start-form [name^='f-'], #start-form .field [id^='f-']", "e => e.map(x => x.name)"
        )
        assert names[0] == "count"  # the one required field, though the schema lists it first
        assert page.input_value("#f-color") == '"red"'  # the schema's default, chosen
        assert page.inner_text("#h-tags") == 'JSON: a list, like ["a", "b"]'
        assert page.get_attribute("#f-tags", "aria-describedby") == "h-tags"
        page.goto(served.url + "definitions/waiter/v1")
        assert page.eval_on_selector("#f-path", "e => e.tagName") == "INPUT"
        page.goto(served.url + "definitions/document_review/v1")
        assert page.eval_on_selector("#f-document", "e => e.tagName") == "TEXTAREA"
    finally:
        context.close()


def test_every_field_the_server_cannot_read_is_named(served: Served, browser: Any) -> None:
    context, page = _page(browser)
    try:
        page.goto(served.url + "definitions/kinds/v1")
        # past the page's own checks, as a script or an old browser would send it
        page.eval_on_selector("#start-form", "f => f.noValidate = true")
        page.eval_on_selector("#f-count", "e => { e.type = 'text'; e.value = 'many'; }")
        page.eval_on_selector("#f-ratio", "e => { e.type = 'text'; e.value = 'nan'; }")
        page.fill("#f-tags", "[1,")
        page.eval_on_selector("#f-tags", "e => e.setCustomValidity('')")
        page.click("#start-form button[type=submit]")
        page.wait_for_selector("#form-error")
        error = page.inner_text("#form-error")
        assert "count: must be a whole number" in error
        assert "ratio: must be a finite number" in error
        assert "tags: is not valid JSON" in error
        assert page.input_value("#f-tags") == "[1,"  # what was typed is kept
    finally:
        context.close()
