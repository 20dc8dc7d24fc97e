"""The Drafts pages in a real browser: Playwright driving Debian's chromium against a real
``flowledger web`` subprocess on a SQLite file where a session (the default one, as
``flowledger web`` without tokens serves it) left a draft in an invalid state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.registry.access import SourceAccess
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession, default_session_id

from .registered import SCRIPT, run
from .servers import chromium, web_server

pytestmark = pytest.mark.slow

DEADLINE_MS = 60_000  # only catches a hang


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield instance
        instance.close()


def make_draft(db: Path) -> dict[str, Any]:
    """``review``: the skeleton with a step whose ``next`` names no node."""

    async def make() -> dict[str, Any]:
        async with open_store(f"sqlite:///{db}") as store:
            session = await default_session_id(store)
            built = WorkflowSession.build(store, session, Catalog())
            drafts = DraftService(DeployService(built, access=SourceAccess.TENANT))
            made = await drafts.create("review")
            step = {"kind": "set", "label": SCRIPT, "assign": {}, "next": "missing_step"}
            return await drafts.patch(
                "review",
                made["revision"],
                [
                    {"op": "add", "path": "/nodes/prepare", "value": step},
                    {"op": "replace", "path": "/start", "value": "prepare"},
                ],
            )

    return run(make())


def test_a_draft_shows_its_graph_diagnostics_and_next_actions(browser: Any, tmp_path: Path) -> None:
    db = tmp_path / "drafts.db"
    draft = make_draft(db)
    assert not draft["valid"], draft
    with web_server(db) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(DEADLINE_MS)
        try:
            page = context.new_page()
            page.goto(url + "runs")
            page.click("header nav a[href='/drafts']")
            page.wait_for_url(url + "drafts")
            row = page.locator("tr[data-draft='review']")
            assert "issue" in row.inner_text() and "skeleton" in row.inner_text()
            row.locator("a").click()
            page.wait_for_url(url + "drafts/review")
            assert page.inner_text("h1") == f"Draft review, revision {draft['revision']}"
            # the step a diagnostic points into is coloured apart from the others
            failed = page.locator("svg.graph .vertex[data-vertex='prepare'] rect")
            other = page.locator("svg.graph .vertex[data-vertex='done'] rect")
            fills = [box.evaluate("e => getComputedStyle(e).fill") for box in (failed, other)]
            assert fills[0] != fills[1], fills
            # the label is text: no script ran, none is in the page
            assert SCRIPT in str(page.text_content("svg.graph .vertex[data-vertex='prepare'] text"))
            assert page.locator("main script").count() == 0
            codes = page.locator("li.diagnostic").evaluate_all(
                "items => items.map(i => i.dataset.code)"
            )
            assert codes == [d["code"] for d in draft["diagnostics"]]
            first = page.locator("li.diagnostic").first
            calls = first.locator(".next-actions code").all_inner_texts()
            code = draft["diagnostics"][0]["code"]
            assert f'explain {{"code": "{code}"}}' in calls
            assert 'draft_get {"draft": "review"}' in calls
            assert page.locator("form[action^='/drafts']").count() == 0  # read-only
        finally:
            context.close()
