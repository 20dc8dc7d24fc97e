"""The Sources pages in a real browser: Playwright driving Debian's chromium against a real
``flowledger web`` subprocess on a SQLite file whose registry the operator filled (the
real ``mcp-server-time`` as ``clock``, probed for real) and where ``flowledger deploy
run`` left a run paused, pinned to it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .deployed import ARTIFACT
from .deployed import flowledger_json as operator
from .registered import (
    SECRET_VALUE,
    SECRET_VAR,
    SENTINEL,
    clock,
    deployment,
    failed_probe,
    hostile,
    register,
)
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


def test_sources_lead_to_a_sources_tools_and_its_pinned_run(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET_VALUE)  # the CLI and the server both read it
    db = tmp_path / "sources.db"
    register(
        db,
        [clock(), hostile()],
        probe=["clock"],
        recorded={"hostile": failed_probe(1, "MCP source is unreachable: refused")},
        disabled=["hostile"],
    )
    artifact = tmp_path / "artifact.yaml"
    artifact.write_text(ARTIFACT)
    document = tmp_path / "deployment.json"
    document.write_text(json.dumps(deployment()))
    operator(db, "artifact", "save", str(artifact))
    operator(db, "deploy", "set", str(document))
    started = operator(db, "deploy", "run", "clock_reg", "--input", "{}")
    assert started["status"] == "interrupted", started
    run_id = started["run_id"]
    with web_server(db) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(DEADLINE_MS)
        try:
            page = context.new_page()
            page.goto(url + "runs")
            page.click("header nav a[href='/sources']")
            page.wait_for_url(url + "sources")
            assert page.get_attribute("header nav a[href='/sources']", "aria-current") == "page"
            enabled = page.locator("tr[data-source='clock'] .source-state")
            disabled = page.locator("tr[data-source='hostile'] .source-state")
            assert enabled.inner_text() == "enabled" and disabled.inner_text() == "disabled"
            colours = [
                badge.evaluate("e => getComputedStyle(e).backgroundColor")
                for badge in (enabled, disabled)
            ]
            assert colours[0] != colours[1] and "rgba(0, 0, 0, 0)" not in colours
            # the description is text, not markup: no script ran, none is in the page
            assert "<script>" in page.inner_text("tr[data-source='hostile']")
            assert page.locator("main script").count() == 0
            assert page.inner_text("tr[data-source='clock'] td:last-child") == "2"

            page.click("a[href='/sources/clock']")
            page.wait_for_url(url + "sources/clock")
            tool = page.locator("#tools tr[data-tool='get_current_time']")
            assert tool.count() == 1
            contract = tool.locator("td:nth-child(5) span")
            full = str(contract.get_attribute("title"))
            assert full.startswith("sha256:") and full[7:19] == contract.inner_text()
            assert "clock_reg" in page.inner_text("#bound-by")
            pinned = page.locator(f"#pinned-runs tr[data-run='{run_id}']")
            assert "interrupted" in pinned.inner_text()
            assert "at revision 1" in pinned.inner_text()
            assert SENTINEL not in page.content() and SECRET_VALUE not in page.content()

            pinned.locator("a").click()
            page.wait_for_url(url + f"runs/{run_id}")
            assert "clock_reg" in page.inner_text("#pinned")

            page.goto(url + "sources/hostile")
            assert "flowledger source enable hostile" in page.inner_text("#disabled-notice")
        finally:
            context.close()
