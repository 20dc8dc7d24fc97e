"""The dashboard in a real browser: Playwright driving Debian's chromium against a real
``flowledger web`` subprocess on a real SQLite file (one server per mode per module)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .servers import chromium, cli, web_server

pytestmark = pytest.mark.slow

DEADLINE_MS = 60_000  # only catches a hang
DOC = {"title": "Launch notes", "document": "We shipped 3 features. Users liked them."}

# Records every vertex state change the page's script makes, before any script runs.
OBSERVE = """
window.__changes = [];
new MutationObserver((records) => {
  for (const r of records) {
    if (r.attributeName === "data-state" && r.target.classList.contains("vertex")) {
      window.__changes.push([r.target.dataset.vertex, r.target.dataset.state]);
    }
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-state"]});
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web") / "browser.db"


@pytest.fixture(scope="module")
def server(db: Path, browser: Any) -> Iterator[str]:
    with web_server(db) as url:
        yield url


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEADLINE_MS)
    context.add_init_script(OBSERVE)
    try:
        yield context.new_page()
    finally:
        context.close()


def start_from_definitions(page: Any, server: str, title: str) -> str:
    page.goto(server + "definitions")
    page.click("a[href='/definitions/document_review/v1']")
    page.fill("#f-title", title)
    page.fill("#f-document", DOC["document"])
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    return str(page.url.rsplit("/", 1)[1])


def vertex(page: Any, name: str, state: str) -> None:
    page.wait_for_selector(f"svg.graph .vertex[data-vertex='{name}'][data-state='{state}']")


def test_start_watch_answer_and_complete(server: str, page: Any) -> None:
    runs = page.context.new_page()
    runs.goto(server + "runs")  # open before the run exists: its row must appear live
    run_id = start_from_definitions(page, server, DOC["title"])
    runs.wait_for_selector(f"tr[data-run='{run_id}']")
    vertex(page, "approval", "paused")
    for name in ("intake", "style", "facts", "summarize", "report"):
        vertex(page, name, "done")
    assert "Publish 'Launch notes'?" in page.inner_text("#pause")
    watcher = page.context.new_page()  # a second tab that is never reloaded
    watcher.goto(page.url)
    vertex(watcher, "approval", "paused")
    page.select_option("#f-approved", "true")
    page.fill("#f-note", "ship it")
    page.click("#resume-form button[type=submit]")
    vertex(watcher, "finalize", "done")
    vertex(watcher, "approval", "done")
    watcher.wait_for_selector("#header .status-completed")
    changes = watcher.evaluate("window.__changes")
    assert ["approval", "done"] in changes and ["finalize", "done"] in changes
    timeline = watcher.inner_text("#timeline")
    assert "run resumed" in timeline and "run completed" in timeline
    runs.wait_for_selector(f"tr[data-run='{run_id}'] .status-completed")
    assert "ship it" not in watcher.content()  # the answer is state: never shown


def test_a_run_started_from_the_cli_lights_up(server: str, db: Path, page: Any) -> None:
    page.goto(server + "runs")
    result = cli(
        db,
        "start",
        "document_review",
        "v1",
        "--no-execute",
        "--json",
        "--input",
        json.dumps({"title": "From the CLI", "document": "Hello there."}),
    )
    assert result.returncode == 0, result.stderr
    run_id = json.loads(result.stdout.strip().splitlines()[-1])["run_id"]
    page.wait_for_selector(f"tr[data-run='{run_id}'] .status-interrupted")
    page.click(f"tr[data-run='{run_id}'] a")
    vertex(page, "approval", "paused")


def test_invalid_input_shows_the_servers_error(server: str, page: Any) -> None:
    page.goto(server + "definitions/document_review/v1")
    page.click("#start-form button[type=submit]")  # empty required fields: the page says no
    assert page.url.endswith("/definitions/document_review/v1")
    assert page.eval_on_selector("#f-title", "e => e.validationMessage")
    # past the page's own check (as a script or an old browser could): the server checks
    page.eval_on_selector("#f-title", "e => e.removeAttribute('maxlength')")
    page.fill("#f-title", "x" * 201)
    page.fill("#f-document", "text")
    page.click("#start-form button[type=submit]")
    page.wait_for_selector("#form-error")
    assert "title" in page.inner_text("#form-error")
    assert page.input_value("#f-document") == "text"


def test_cancel_with_a_reason(server: str, page: Any) -> None:
    start_from_definitions(page, server, "To cancel")
    vertex(page, "approval", "paused")
    page.fill("#cancel-form input[name=reason]", "changed my mind")
    page.once("dialog", lambda dialog: dialog.accept())  # it asks first
    page.click("#cancel-form button")
    page.wait_for_selector("#header .status-cancelled")
    assert page.query_selector("#cancel-form") is None


def test_missing_csrf_token_is_refused(server: str, page: Any) -> None:
    page.goto(server + "definitions/document_review/v1")
    response = page.request.post(
        server + "definitions/document_review/v1/start",
        form={"title": "forged", "document": "forged"},
    )
    assert response.status == 403
    page.goto(server + "runs?q=")
    assert "forged" not in page.content()


def test_read_only_has_no_buttons_and_refuses_posts(server: str, db: Path, page: Any) -> None:
    run_id = start_from_definitions(page, server, "Read me")
    vertex(page, "approval", "paused")
    token = page.eval_on_selector("#resume-form input[name=csrf]", "e => e.value")
    with web_server(db, "--read-only") as reader:
        page.goto(reader + f"runs/{run_id}")
        vertex(page, "approval", "paused")
        assert page.query_selector("main button") is None
        assert page.query_selector("main form[method=post]") is None
        assert page.query_selector("main a.fork") is None
        assert page.request.get(reader + f"runs/{run_id}/fork?revision=0").status == 404
        page.goto(reader + "definitions/document_review/v1")
        assert page.query_selector("main button") is None
        for path in (
            f"runs/{run_id}/resume",
            f"runs/{run_id}/cancel",
            f"runs/{run_id}/fork",
            "definitions/document_review/v1/start",
        ):
            response = page.request.post(reader + path, form={"csrf": token, "approved": "true"})
            assert response.status in (404, 405), path


def test_tokens_wrong_rejected_and_sessions_apart(browser: Any, tmp_path: Path) -> None:
    alice, bob = "alice-browser-token-01", "bob-browser-token-0002"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{alice}\n{bob}\n")
    os.chmod(tokens, 0o600)
    with web_server(tmp_path / "tokens.db", "--tokens-file", str(tokens)) as url:
        contexts = [browser.new_context() for _ in range(2)]
        try:
            for context in contexts:
                context.set_default_timeout(DEADLINE_MS)
            a, b = (context.new_page() for context in contexts)
            a.goto(url + "runs")
            assert a.url.endswith("/login")
            a.fill("#token", "not-the-right-token-000")
            a.click("#login-form button")
            assert "unknown token" in a.inner_text("#form-error")
            a.fill("#token", alice)
            a.click("#login-form button")
            a.wait_for_url(url + "runs")
            run_id = start_from_definitions(a, url, "Alice's")
            b.goto(url + "login")
            b.fill("#token", bob)
            b.click("#login-form button")
            b.wait_for_url(url + "runs")
            assert run_id not in b.content()
            response = b.goto(url + f"runs/{run_id}")
            assert response is not None and response.status == 404
        finally:
            for context in contexts:
                context.close()


def test_json_fields_are_checked_in_the_page(server: str, page: Any) -> None:
    page.goto(server + "definitions/kinds/v1")
    page.fill("#f-count", "2")
    page.fill("#f-tags", "[oops")
    page.click("#start-form button[type=submit]")
    assert page.url.endswith("/definitions/kinds/v1")  # not sent
    assert "not valid JSON" in page.eval_on_selector("#f-tags", "e => e.validationMessage")
    page.fill("#f-tags", '["a"]')
    page.select_option("#f-color", '"green"')
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    page.wait_for_selector("#header .status-completed")
    vertex(page, "done", "done")


def test_a_paused_deployed_run_shows_its_pin_and_revalidates(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .deployed import SECRET, SECRET_NAME, SECRET_VALUE, paused_deployed_run

    monkeypatch.setenv(SECRET_NAME, SECRET_VALUE)  # the CLI and the server both read it
    db = tmp_path / "deployed.db"
    run_id = paused_deployed_run(db)
    with web_server(db) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(DEADLINE_MS)
        try:
            page = context.new_page()
            page.goto(f"{url}runs/{run_id}")
            pinned = page.inner_text("#pinned")
            assert "clock_dep" in pinned and "clock_sign_off" in pinned
            assert SECRET in pinned and "get_current_time" in pinned
            assert SECRET_VALUE not in page.content()
            assert "sources were not contacted" in page.inner_text("#readiness")
            page.click("#revalidate-form button[type=submit]")
            page.wait_for_selector("#readiness :text('revalidated against the pinned sources')")
            assert page.inner_text("#readiness-status") == "ready"
        finally:
            context.close()


def test_fork_from_here_opens_the_fork(server: str, page: Any) -> None:
    origin = start_from_definitions(page, server, "Fork me")
    vertex(page, "approval", "paused")
    page.click("#timeline tr:has(.kind-run_started) a.fork")
    page.wait_for_url(re.compile(r"/runs/" + origin + r"/fork\?revision=0$"))
    page.check("#f-confirm")  # every step runs again: asked first
    page.click("#fork-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/(?!" + origin + r")[0-9a-f-]{36}$"))
    fork = str(page.url.rsplit("/", 1)[1])
    assert fork != origin
    forked_from = page.inner_text("#forked-from")
    assert origin[:8] in forked_from and "revision 0" in forked_from
    vertex(page, "approval", "paused")  # the whole graph ran again in the fork
    assert "Publish 'Fork me'?" in page.inner_text("#pause")
    # Rows that arrived live carry a working link too.
    page.wait_for_selector("#timeline tr:has(.kind-run_interrupted) a.fork")
    page.click("#timeline tr:has(.kind-run_interrupted) a.fork")
    # the pause is inside its step: the fork asks the question again
    assert "approval" in page.inner_text("#fork-again")
    page.check("#f-confirm")
    page.click("#fork-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/(?!" + fork + r")[0-9a-f-]{36}$"))
    second = str(page.url.rsplit("/", 1)[1])
    assert second not in (origin, fork)
    assert fork[:8] in page.inner_text("#forked-from")
    vertex(page, "approval", "paused")
    # The origin is still paused, waiting for its own answer.
    page.goto(server + f"runs/{origin}")
    vertex(page, "approval", "paused")
    assert page.query_selector("#forked-from") is None


def test_fork_needs_the_csrf_token(server: str, page: Any) -> None:
    origin = start_from_definitions(page, server, "Forged fork")
    vertex(page, "approval", "paused")
    response = page.request.post(server + f"runs/{origin}/fork", form={"revision": "0"})
    assert response.status == 403
    token = page.eval_on_selector("#cancel-form input[name=csrf]", "e => e.value")
    bad = page.request.post(server + f"runs/{origin}/fork", form={"csrf": token, "revision": "x"})
    assert bad.status == 400
    beyond = page.request.post(
        server + f"runs/{origin}/fork", form={"csrf": token, "revision": "9999"}
    )
    assert beyond.status == 400 and "invalid fork revision" in beyond.text()
