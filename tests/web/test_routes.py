"""Every route of the dashboard and its error paths, through Starlette's TestClient on a
real SQLite database (the dashboard owns the session and executes the runs)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from flowledger.web import WebServer, WebStartupError
from flowledger.web.views import RUNS_PAGE

from .conftest import DEADLINE, csrf, dashboard, start, status_of, wait_for

DOC = {"title": "Quarterly", "document": "Sales grew 12 percent. The team is happy."}


def test_home_redirects_to_the_runs(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 303
    assert response.headers["location"] == "/runs"


def test_runs_page_lists_filters_searches_and_pages(client: TestClient) -> None:
    empty = client.get("/runs")
    assert empty.status_code == 200
    assert "No runs" in empty.text
    assert "content-security-policy" in empty.headers
    review = start(client, "document_review", "v1", **DOC)
    kinds = start(client, "kinds", "v1", count="1")
    wait_for(client, review, "interrupted")
    wait_for(client, kinds, "completed")
    page = client.get("/runs").text
    assert review in page and kinds in page
    assert 'class="status status-interrupted"' in page
    assert "5/7" in page  # progress of the paused review
    by_status = client.get("/runs", params={"status": "completed"}).text
    assert kinds in by_status and review not in by_status
    by_definition = client.get("/runs", params={"definition": "document_review"}).text
    assert review in by_definition and kinds not in by_definition
    by_id = client.get("/runs", params={"q": review[:8]}).text
    assert review in by_id and kinds not in by_id
    none = client.get("/runs", params={"q": "zzzz"}).text
    assert "match these filters" in none
    junk = client.get("/runs", params={"after": "not-a-cursor"})
    assert junk.status_code == 400


def test_runs_page_pages_newest_first_with_a_cursor(client: TestClient) -> None:
    started = [start(client, "kinds", "v1", count="1") for _ in range(RUNS_PAGE + 2)]
    review = start(client, "document_review", "v1", **DOC)
    for run_id in started:
        wait_for(client, run_id, "completed")
    wait_for(client, review, "interrupted")
    newest_first = [review, *reversed(started)]
    first = client.get("/runs").text
    shown = re.findall(r'href="/runs/([0-9a-f-]{36})"', first)
    assert list(dict.fromkeys(shown)) == newest_first[:RUNS_PAGE]
    assert f"{RUNS_PAGE} runs shown" in first and "← newest" not in first
    older = re.search(r'href="(/runs\?after=[^"]+)" id="older"', first)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&")).text
    shown = re.findall(r'href="/runs/([0-9a-f-]{36})"', second)
    assert list(dict.fromkeys(shown)) == newest_first[RUNS_PAGE:]
    assert "← newest" in second and 'id="older"' not in second
    # Filters page through the index of their own: status, definition, both.
    done = client.get("/runs", params={"status": "completed"}).text
    assert review not in done and started[-1] in done and 'id="older"' in done
    paused = client.get("/runs", params={"status": "interrupted"}).text
    assert review in paused and started[0] not in paused and 'id="older"' not in paused
    reviews = client.get("/runs", params={"definition": "document_review"}).text
    assert review in reviews and started[0] not in reviews
    both = client.get("/runs", params={"definition": "kinds", "status": "interrupted"}).text
    assert "match these filters" in both
    # A run ID search lists the IDs that start with the text, upper case or not.
    found = client.get("/runs", params={"q": started[3][:13].upper()}).text
    assert started[3] in found and review not in re.findall(r"/runs/([0-9a-f-]{36})", found)


def test_definitions_show_schemas_graph_and_start_form(client: TestClient) -> None:
    listing = client.get("/definitions").text
    for name in ("document_review", "flaky", "kinds"):
        assert f'href="/definitions/{name}/v1"' in listing
    page = client.get("/definitions/document_review/v1").text
    assert "<svg" in page and 'data-vertex="approval"' in page
    assert 'data-role="entry"' in page and 'data-role="finish"' in page
    assert "&#34;maxLength&#34;: 20000" in page  # the input schema, escaped
    assert "&#34;approved&#34;" in page  # the resume schema
    assert 'id="start-form"' in page and 'name="document"' in page
    route = client.get("/definitions/kinds/v1").text
    assert 'class="route"' in route  # the route work -> work/done is drawn dashed


def test_unknown_definition_is_404(client: TestClient) -> None:
    response = client.get("/definitions/nope/v1")
    assert response.status_code == 404
    assert "no definition" in response.text
    token = csrf(client)
    refused = client.post("/definitions/nope/v1/start", data={"csrf": token})
    assert refused.status_code == 404


def test_start_refuses_invalid_input_with_the_servers_error(client: TestClient) -> None:
    token = csrf(client, "/definitions/document_review/v1")
    missing = client.post(
        "/definitions/document_review/v1/start", data={"csrf": token, "title": "t"}
    )
    assert missing.status_code == 400
    assert "document: is required" in missing.text
    too_long = client.post(
        "/definitions/document_review/v1/start",
        data={"csrf": token, "title": "x" * 201, "document": "d"},
    )
    assert too_long.status_code == 400
    assert 'id="form-error"' in too_long.text and "title" in too_long.text
    assert "workflow tools:" not in too_long.text  # the tools' prefix is for models
    assert 'value="' + "x" * 201 + '"' in too_long.text  # what was typed stays
    assert "No runs" in client.get("/runs").text  # nothing was started


def test_every_field_kind_is_parsed(client: TestClient) -> None:
    page = client.get("/definitions/kinds/v1").text
    assert 'type="number"' in page and 'min="1"' in page and 'max="10"' in page
    assert '<option value="&#34;green&#34;"' in page
    assert 'data-json="1"' in page  # tags: an array, as JSON
    token = csrf(client, "/definitions/kinds/v1")
    for fields, message in (
        ({"count": "x"}, "count: must be a whole number"),
        ({"count": "1", "ratio": "abc"}, "ratio: must be a number"),
        ({"count": "1", "tags": "[oops"}, "tags: is not valid JSON"),
        ({"count": "1", "flag": "maybe"}, "flag: choose yes or no"),
        ({"count": "11"}, "count"),  # the schema's maximum, from the tool
        ({"count": "1", "tags": "[1]"}, "tags"),
    ):
        refused = client.post("/definitions/kinds/v1/start", data={"csrf": token, **fields})
        assert refused.status_code == 400, fields
        assert message in refused.text
    run = start(
        client,
        "kinds",
        "v1",
        count="2",
        ratio="0.25",
        color='"green"',
        flag="true",
        tags='["a", "b"]',
    )
    assert wait_for(client, run, "completed") == "completed"


def test_run_page_shows_header_graph_timeline_and_pause(client: TestClient) -> None:
    run = start(client, "document_review", "v1", **DOC)
    wait_for(client, run, "interrupted")
    page = client.get(f"/runs/{run}").text
    assert "Readiness" in page and ">ready<" in page
    assert re.search(r'data-vertex="approval" data-state="paused"', page)
    assert re.search(r'data-vertex="intake" data-state="done"', page)
    assert re.search(r'data-vertex="finalize" data-state="not_reached"', page)
    assert "run started" in page and "vertex completed" in page and "run interrupted" in page
    assert "Publish &#39;Quarterly&#39;?" in page  # the pause's request
    assert 'id="resume-form"' in page and 'name="approved"' in page
    assert 'id="cancel-form"' in page
    assert DOC["document"] not in page  # never the input
    assert f"/events/runs/{run}?after=" in page


def test_timeline_pages_with_the_history_cursors(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("flowledger.web.app.TIMELINE_PAGE", 3)
    run = start(client, "document_review", "v1", **DOC)
    wait_for(client, run, "interrupted")
    seen: list[str] = []
    pages = 0
    path = f"/runs/{run}"
    for _ in range(20):
        page = client.get(path).text
        found = re.findall(r'<tr data-event="([0-9a-f-]+)"', page)
        assert 1 <= len(found) <= 3
        seen += found
        pages += 1
        later = re.search(r'href="(/runs/[^"]+\?after=[^"]+)" id="timeline-later"', page)
        if later is None:
            break
        path = later.group(1).replace("%3A", ":")
    # run started, five vertices completed, run interrupted: each once, over three pages
    assert len(seen) == len(set(seen)) == 7
    assert pages == 3
    assert client.get(f"/runs/{run}", params={"after": "x"}).status_code == 400


def test_resume_validates_on_the_server_then_completes(client: TestClient) -> None:
    run = start(client, "document_review", "v1", **DOC)
    wait_for(client, run, "interrupted")
    token = csrf(client, f"/runs/{run}")
    refused = client.post(f"/runs/{run}/resume", data={"csrf": token, "note": "n"})
    assert refused.status_code == 400
    assert "approved: is required" in refused.text
    too_long = client.post(
        f"/runs/{run}/resume", data={"csrf": token, "approved": "true", "note": "n" * 501}
    )
    assert too_long.status_code == 400
    assert "note" in too_long.text and 'id="form-error"' in too_long.text
    assert status_of(client, run) == "interrupted"
    done = client.post(f"/runs/{run}/resume", data={"csrf": token, "approved": "true"})
    assert done.status_code == 303
    assert wait_for(client, run, "completed") == "completed"
    page = client.get(f"/runs/{run}").text
    assert re.search(r'data-vertex="finalize" data-state="done"', page)
    assert 'id="cancel-form"' not in page  # terminal: nothing to cancel
    again = client.post(f"/runs/{run}/resume", data={"csrf": token, "approved": "true"})
    assert again.status_code == 409


def test_errored_pause_shows_its_error_and_retries(client: TestClient) -> None:
    run = start(client, "flaky", "v1", title="retry-me")
    wait_for(client, run, "interrupted")
    page = client.get(f"/runs/{run}").text
    assert "ConnectionError" in page and "the source did not answer" in page
    assert re.search(r'data-vertex="fetch" data-state="failed"', page)
    assert f'action="/runs/{run}/retry"' in page
    token = csrf(client, f"/runs/{run}")
    wrong = client.post(f"/runs/{run}/resume", data={"csrf": token})
    assert wrong.status_code == 409 and "retry it instead" in wrong.text
    retried = client.post(f"/runs/{run}/retry", data={"csrf": token})
    assert retried.status_code == 303
    assert wait_for(client, run, "completed") == "completed"
    other = start(client, "document_review", "v1", **DOC)
    wait_for(client, other, "interrupted")
    refused = client.post(f"/runs/{other}/retry", data={"csrf": token})
    assert refused.status_code == 409 and "waits for an answer" in refused.text


def test_cancel_with_a_reason(client: TestClient) -> None:
    run = start(client, "document_review", "v1", **DOC)
    wait_for(client, run, "interrupted")
    token = csrf(client, f"/runs/{run}")
    too_long = client.post(f"/runs/{run}/cancel", data={"csrf": token, "reason": "r" * 600})
    assert too_long.status_code == 400 and "limit is 512" in too_long.text
    cancelled = client.post(f"/runs/{run}/cancel", data={"csrf": token, "reason": "not needed"})
    assert cancelled.status_code == 303
    assert wait_for(client, run, "cancelled") == "cancelled"
    again = client.post(f"/runs/{run}/cancel", data={"csrf": token})
    assert again.status_code == 303  # idempotent
    done = start(client, "kinds", "v1", count="1")
    wait_for(client, done, "completed")
    refused = client.post(f"/runs/{done}/cancel", data={"csrf": token})
    assert refused.status_code == 409 and "cannot be cancelled" in refused.text


def test_unknown_and_malformed_runs_are_404(client: TestClient) -> None:
    missing = "00000000-0000-4000-8000-000000000001"
    assert client.get(f"/runs/{missing}").status_code == 404
    assert client.get("/runs/not-a-uuid").status_code == 404
    assert client.get(f"/events/runs/{missing}").status_code == 404
    token = csrf(client)
    for action in ("resume", "retry", "cancel"):
        assert client.post(f"/runs/{missing}/{action}", data={"csrf": token}).status_code == 404


def test_posts_without_the_csrf_token_are_refused(client: TestClient) -> None:
    token = csrf(client, "/definitions/kinds/v1")
    no_field = client.post("/definitions/kinds/v1/start", data={"count": "1"})
    assert no_field.status_code == 403 and "CSRF" in no_field.text
    wrong = client.post("/definitions/kinds/v1/start", data={"csrf": "x" + token, "count": "1"})
    assert wrong.status_code == 403
    cross = client.post(
        "/definitions/kinds/v1/start",
        data={"csrf": token, "count": "1"},
        headers={"origin": "http://evil.example"},
    )
    assert cross.status_code == 403
    client.cookies.clear()
    no_cookie = client.post("/definitions/kinds/v1/start", data={"csrf": token, "count": "1"})
    assert no_cookie.status_code == 403
    assert "No runs" in client.get("/runs").text


def test_only_loopback_host_names_are_answered(client: TestClient) -> None:
    rebound = client.get("/runs", headers={"host": "attacker.example:8000"})
    assert rebound.status_code == 400
    assert client.get("/runs", headers={"host": "localhost:8000"}).status_code == 200


def test_events_refuse_a_malformed_cursor(client: TestClient) -> None:
    run = start(client, "kinds", "v1", count="1")
    refused = client.get(f"/events/runs/{run}", params={"after": "nope"})
    assert refused.status_code == 400
    refused = client.get(f"/events/runs/{run}", headers={"last-event-id": "1"})
    assert refused.status_code == 400


def test_static_assets_are_served_from_the_package(client: TestClient) -> None:
    css = client.get("/static/app.css")
    assert css.status_code == 200 and "svg.graph" in css.text
    js = client.get("/static/app.js")
    assert js.status_code == 200 and "EventSource" in js.text
    assert client.get("/static/../app.py").status_code == 404


def test_read_only_has_no_buttons_and_refuses_posts(db: Path) -> None:
    with dashboard(db) as owner:
        run = start(owner, "document_review", "v1", **DOC)
        wait_for(owner, run, "interrupted")
    with dashboard(db, read_only=True) as reader:
        page = reader.get(f"/runs/{run}").text
        assert "read-only" in page
        assert "<button" not in page.split("</header>")[1]
        assert "Publish &#39;Quarterly&#39;?" in page  # the request is still shown
        assert 'id="start-form"' not in reader.get("/definitions/document_review/v1").text
        token = csrf(reader)
        for path in (
            f"/runs/{run}/resume",
            f"/runs/{run}/retry",
            f"/runs/{run}/cancel",
            "/definitions/document_review/v1/start",
        ):
            response = reader.post(path, data={"csrf": token, "approved": "true"})
            assert response.status_code in (404, 405), path
        assert status_of(reader, run) == "interrupted"


def test_tokens_sign_in_and_keep_sessions_apart(db: Path) -> None:
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    tokens = {
        alice: "11111111-1111-4111-8111-111111111111",
        bob: "22222222-2222-4222-8222-222222222222",
    }
    with dashboard(db, tokens=tokens) as client:
        anonymous = client.get("/runs")
        assert anonymous.status_code == 303 and anonymous.headers["location"] == "/login"
        assert client.get("/events/runs").status_code == 401
        token = csrf(client, "/login")
        wrong = client.post("/login", data={"csrf": token, "token": "not-a-known-token-123"})
        assert wrong.status_code == 401 and "unknown token" in wrong.text
        no_csrf = client.post("/login", data={"token": alice})
        assert no_csrf.status_code == 403
        signed = client.post("/login", data={"csrf": token, "token": alice})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert "fl_login=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert alice not in cookie and "Secure" not in cookie  # plain HTTP on loopback
        run = start(client, "document_review", "v1", **DOC)
        wait_for(client, run, "interrupted")
        as_bob = client.get(f"/runs/{run}", headers={"authorization": f"Bearer {bob}"})
        assert as_bob.status_code == 404
        bob_list = client.get("/runs", headers={"authorization": f"Bearer {bob}"})
        assert run not in bob_list.text
        bad_bearer = client.get("/runs", headers={"authorization": "Bearer wrong-token-12345678"})
        assert bad_bearer.status_code == 303
        as_alice = client.get(f"/runs/{run}", headers={"authorization": f"Bearer {alice}"})
        assert as_alice.status_code == 200
        out = client.post("/logout", data={"csrf": csrf(client)})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert client.get(f"/runs/{run}").status_code == 303
        over_https = client.post(
            "https://127.0.0.1/login", data={"csrf": csrf(client, "/login"), "token": alice}
        )
        assert "Secure" in over_https.headers["set-cookie"]


def test_non_loopback_without_tokens_is_refused() -> None:
    with pytest.raises(WebStartupError, match="non-loopback"):
        WebServer("sqlite:///unused.db", host="0.0.0.0")
    WebServer(
        "sqlite:///unused.db",
        host="0.0.0.0",
        tokens={"t" * 16: "11111111-1111-4111-8111-111111111111"},
    )


def test_a_session_that_cannot_be_opened_is_503(tmp_path: Path) -> None:
    token = "a-token-for-a-missing-db"
    # read-only on a database that does not exist: the token's session cannot be opened
    with dashboard(
        tmp_path / "missing.db",
        read_only=True,
        tokens={token: "33333333-3333-4333-8333-333333333333"},
    ) as client:
        headers = {"authorization": f"Bearer {token}"}
        response = client.get("/runs", headers=headers)
        assert response.status_code == 503
        assert "unavailable" in response.text and "missing.db" not in response.text
        assert client.get("/events/runs", headers=headers).status_code == 503
    assert not (tmp_path / "missing.db").exists()


def test_a_form_too_large_is_refused(client: TestClient) -> None:
    token = csrf(client, "/definitions/document_review/v1")
    response = client.post(
        "/definitions/document_review/v1/start",
        data={"csrf": token, "title": "t", "document": "d" * (1 << 20)},
    )
    assert response.status_code == 413
    assert "No runs" in client.get("/runs").text


def test_login_without_tokens_goes_to_the_runs(client: TestClient) -> None:
    assert client.get("/login").status_code == 200
    assert client.get("/login", headers={"host": "evil.example"}).status_code == 400
    signed = client.post("/login", data={"csrf": csrf(client, "/login"), "token": "x"})
    assert signed.status_code == 303 and signed.headers["location"] == "/runs"
    assert client.post("/logout", data={}).status_code == 403


def _vertex_state(page: str, vertex: str) -> str:
    match = re.search(rf'data-vertex="{vertex}" data-state="([a-z_]+)"', page)
    assert match is not None, page
    return match.group(1)


def test_a_vertex_re_entered_in_a_loop_shows_running_again(
    client: TestClient, tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    run_id = start(client, "looper", "v1", path=str(flag))
    deadline = time.monotonic() + DEADLINE
    while True:  # until the first round of spin has completed and the second is under way
        page = client.get(f"/runs/{run_id}").text
        if page.count("kind-vertex_completed") >= 1:
            break
        assert time.monotonic() < deadline, "spin never completed its first round"
        time.sleep(0.05)
    assert status_of(client, run_id) == "running"
    page = client.get(f"/runs/{run_id}").text
    assert _vertex_state(page, "spin") == "running"  # completed once, but running again
    assert _vertex_state(page, "end") == "not_reached"
    flag.touch()
    wait_for(client, run_id, "completed")
    page = client.get(f"/runs/{run_id}").text
    assert _vertex_state(page, "spin") == _vertex_state(page, "end") == "done"


def test_the_fork_form_escapes_what_it_shows_again_and_checks_its_token(db: Path) -> None:
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    tokens = {
        alice: "11111111-1111-4111-8111-111111111111",
        bob: "22222222-2222-4222-8222-222222222222",
    }
    with dashboard(db, tokens=tokens) as client:
        client.headers["authorization"] = f"Bearer {alice}"
        run = start(client, "kinds", "v1", count="1")
        wait_for(client, run, "completed")
        page = client.get(f"/runs/{run}/fork", params={"revision": "0"})
        assert page.status_code == 200 and 'id="fork-form"' in page.text
        token = csrf(client, f"/runs/{run}/fork?revision=0")
        payload = '{"color": "</textarea><script>alert(1)</script>"}'
        shown = client.post(
            f"/runs/{run}/fork", data={"csrf": token, "revision": "0", "patch": payload}
        )
        assert shown.status_code == 400  # not confirmed
        assert "<script>alert(1)</script>" not in shown.text
        assert "&lt;/textarea&gt;&lt;script&gt;" in shown.text
        assert client.post(f"/runs/{run}/fork", data={"revision": "0"}).status_code == 403
        cross = client.post(
            f"/runs/{run}/fork",
            data={"csrf": token, "revision": "0", "confirm": "yes"},
            headers={"origin": "http://evil.example"},
        )
        assert cross.status_code == 403
        missing = "00000000-0000-4000-8000-000000000001"
        assert client.get(f"/runs/{missing}/fork?revision=0").status_code == 404
        # another session's run: the same 404 as an unknown one, for the page and the POST
        client.headers["authorization"] = f"Bearer {bob}"
        assert client.get(f"/runs/{run}/fork?revision=0").status_code == 404
        token = csrf(client, "/runs")
        theirs = client.post(
            f"/runs/{run}/fork", data={"csrf": token, "revision": "0", "confirm": "yes"}
        )
        assert theirs.status_code == 404
        assert run not in client.get("/runs").text
        client.headers["authorization"] = f"Bearer {alice}"
        listed = re.findall(r'<tr data-run="([0-9a-f-]+)"', client.get("/runs").text)
        assert listed == [run]  # nothing was forked


def test_the_shared_stream_worker_is_served(client: TestClient) -> None:
    worker = client.get("/static/live-worker.js")
    assert worker.status_code == 200 and "/events?" in worker.text
