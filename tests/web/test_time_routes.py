"""Time in the dashboard and bulk actions (issue #31), through its HTTP front door on a
real SQLite file: a run's time page (durations, executions, attempts and retries per
vertex, a Gantt of its vertices), the runs list's duration and "paused by" columns,
bulk cancel and bulk retry of errored pauses (a confirmation page, CSRF, redirect after
POST, a run that changed meanwhile reported and left alone), bad input named with
nothing written, escaping, and a tenant that tries to reach another session's runs."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool

from . import timed_app
from .conftest import BASE, csrf, start, status_of, wait_for

DOC = {"title": "Quarterly", "document": "Costs fell."}
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
TOKENS = {
    ALICE: "11111111-1111-4111-8111-111111111111",
    BOB: "22222222-2222-4222-8222-222222222222",
}


@contextmanager
def dashboard(
    db: Path, *, read_only: bool = False, tokens: Mapping[str, str] | None = None
) -> Iterator[TestClient]:
    pool = SessionPool(f"sqlite:///{db}", timed_app.catalog(), read_only=read_only)
    app = Dashboard(pool, Gate(tokens or {}, loopback=True), read_only=read_only).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            yield client
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]


def _vertex_row(page: str, vertex: str) -> list[str]:
    match = re.search(rf'<tr data-vertex="{vertex}">(.*?)</tr>', page, re.S)
    assert match is not None, page
    return [
        re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", match[1])
    ]


def _plan(client: TestClient, action: str, *runs: str) -> tuple[str, list[str], dict[str, str]]:
    page = client.get("/runs/bulk", params=[("action", action), *(("run", r) for r in runs)])
    assert page.status_code == 200, page.text
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    applies = dict(re.findall(r'<tr data-run="([0-9a-f-]+)" data-applies="(\w+)"', page.text))
    return token[1], re.findall(r'name="seen" value="([^"]+)"', page.text), applies


def _report(client: TestClient, response: object) -> dict[str, str]:
    location = response.headers["location"]  # type: ignore[attr-defined]
    assert response.status_code == 303 and location.startswith("/runs/bulk/done?")  # type: ignore[attr-defined]
    page = client.get(location)
    assert page.status_code == 200
    return dict(re.findall(r'<tr data-run="([0-9a-f-]+)" data-outcome="(\w+)"', page.text))


def test_the_time_page_counts_attempts_retries_and_executions(tmp_path: Path) -> None:
    with dashboard(tmp_path / "web.db") as client:
        retried = start(client, "retrying", "v1", title="time-1")
        wait_for(client, retried, "completed")
        page = client.get(f"/runs/{retried}/time")
        assert page.status_code == 200, page.text
        # label, executions, attempts, retries: one execution that took three attempts
        assert _vertex_row(page.text, "shaky")[:4] == ["Shaky step shaky", "1", "3", "2"]
        assert _vertex_row(page.text, "settle")[:4] == ["Settle settle", "1", "1", "0"]
        assert 'data-vertex="shaky" data-attempts="3"' in page.text  # its Gantt bar
        assert page.text.count('<rect class="bar bar-vertex"') == 2
        assert "3 attempts" in page.text  # the bar's tooltip
        assert "so far" not in page.text.split('id="run-duration">')[1].split("</dd>")[0]

        paused = start(client, "flaky", "v1", title="time-2")  # an errored pause, retried
        wait_for(client, paused, "interrupted")
        assert "so far" in client.get(f"/runs/{paused}/time").text
        token = csrf(client, f"/runs/{paused}")
        assert client.post(f"/runs/{paused}/retry", data={"csrf": token}).status_code == 303
        wait_for(client, paused, "completed")
        page = client.get(f"/runs/{paused}/time").text
        assert _vertex_row(page, "fetch")[:4] == ["fetch fetch", "2", "2", "0"]
        assert re.search(r'data-vertex="fetch" data-attempts="1"', page)
        run_page = client.get(f"/runs/{paused}").text
        assert f'href="/runs/{paused}/time" id="time-link"' in run_page
        assert client.get("/runs/00000000-0000-4000-8000-000000000001/time").status_code == 404
        assert client.get("/runs/nope/time").status_code == 404


def test_the_runs_list_shows_duration_and_what_paused_a_run(tmp_path: Path) -> None:
    with dashboard(tmp_path / "web.db") as client:
        asking = start(client, "document_review", "v1", **DOC)
        erring = start(client, "flaky", "v1", title="list-1")
        done = start(client, "kinds", "v1", count="1")
        wait_for(client, asking, "interrupted")
        wait_for(client, erring, "interrupted")
        wait_for(client, done, "completed")
        page = client.get("/runs").text
        rows = dict(re.findall(r'<tr data-run="([0-9a-f-]+)">(.*?)</tr>', page, re.S))
        paused_by = {
            run: re.search(r'class="paused-by">(.*?)</td>', row, re.S)[1]  # type: ignore[index]
            for run, row in rows.items()
        }
        assert paused_by[asking] == "a request" and paused_by[erring] == "an error"
        assert "\u2013" in paused_by[done]  # the dash of "nothing"
        assert "so far" in rows[asking] and "so far" not in rows[done]
        assert re.search(r'class="duration" data-seconds="\d+\.\d{3}">', rows[done])


def test_bulk_cancel_confirms_then_reports_each_run(tmp_path: Path) -> None:
    with dashboard(tmp_path / "web.db") as client:
        one = start(client, "document_review", "v1", **DOC)
        two = start(client, "flaky", "v1", title="bulk-1")
        done = start(client, "kinds", "v1", count="1")
        for run in (one, two):
            wait_for(client, run, "interrupted")
        wait_for(client, done, "completed")
        token, seen, applies = _plan(client, "cancel", one, two, done, one)
        assert applies == {one: "yes", two: "yes", done: "no"}  # a duplicate listed once
        assert [item.split(":")[0] for item in seen] == [one, two]  # the finished one: not
        assert status_of(client, one) == "interrupted"  # the confirmation page wrote nothing
        reason = "bulk <b>tidy</b>"
        response = client.post(
            "/runs/bulk",
            data={"csrf": token, "action": "cancel", "seen": seen, "reason": reason},
        )
        assert _report(client, response) == {one: "cancelled", two: "cancelled"}
        assert status_of(client, one) == status_of(client, two) == "cancelled"
        assert status_of(client, done) == "completed"
        page = client.get(f"/runs/{one}").text
        assert "bulk &lt;b&gt;tidy&lt;/b&gt;" in page and "<b>tidy" not in page


def test_bulk_retry_leaves_a_run_that_changed_meanwhile_alone(tmp_path: Path) -> None:
    with dashboard(tmp_path / "web.db") as client:
        first = start(client, "flaky", "v1", title="retry-1")
        second = start(client, "flaky", "v1", title="retry-2")
        asking = start(client, "document_review", "v1", **DOC)
        for run in (first, second, asking):
            wait_for(client, run, "interrupted")
        token, seen, applies = _plan(client, "retry", first, second, asking)
        assert applies == {first: "yes", second: "yes", asking: "no"}
        # meanwhile, someone else retries the second run: it is no longer that pause
        single = csrf(client, f"/runs/{second}")
        assert client.post(f"/runs/{second}/retry", data={"csrf": single}).status_code == 303
        wait_for(client, second, "completed")
        response = client.post("/runs/bulk", data={"csrf": token, "action": "retry", "seen": seen})
        assert _report(client, response) == {first: "retried", second: "changed"}
        wait_for(client, first, "completed")
        assert status_of(client, asking) == "interrupted"  # a request pause is never retried
        again = client.post("/runs/bulk", data={"csrf": token, "action": "retry", "seen": seen})
        assert _report(client, again) == {first: "changed", second: "changed"}


def test_bulk_input_is_checked_and_its_post_needs_the_csrf_field(tmp_path: Path) -> None:
    with dashboard(tmp_path / "web.db") as client:
        run = start(client, "document_review", "v1", **DOC)
        wait_for(client, run, "interrupted")
        nothing = client.get("/runs/bulk", params={"action": "cancel"})
        assert nothing.status_code == 400 and "run: choose at least one run" in nothing.text
        wrong = client.get("/runs/bulk", params={"action": "delete", "run": run})
        assert wrong.status_code == 400 and "action: must be cancel or retry" in wrong.text
        markup = client.get("/runs/bulk", params={"action": "cancel", "run": "<script>x</script>"})
        assert markup.status_code == 400 and "<script>x" not in markup.text
        assert "&lt;script&gt;x" in markup.text
        many = [("run", f"00000000-0000-4000-8000-{n:012d}") for n in range(101)]
        too_many = client.get("/runs/bulk", params=[("action", "cancel"), *many])
        assert too_many.status_code == 400 and "at most 100 runs" in too_many.text
        token, seen, _ = _plan(client, "cancel", run)
        forged = client.post(
            "/runs/bulk", data={"csrf": token, "action": "cancel", "seen": run + ":done:x:1"}
        )
        assert forged.status_code == 400 and "seen:" in forged.text
        no_field = client.post("/runs/bulk", data={"action": "cancel", "seen": seen})
        assert no_field.status_code == 403
        cross = client.post(
            "/runs/bulk",
            data={"csrf": token, "action": "cancel", "seen": seen},
            headers={"origin": "http://evil.example"},
        )
        assert cross.status_code == 403
        crafted = client.get(
            "/runs/bulk/done", params=[("r", f"{run}:<b>x</b>"), ("r", "<i>y</i>:cancelled")]
        )
        assert crafted.status_code == 200 and "<b>x" not in crafted.text
        assert 'data-outcome="' not in crafted.text  # nothing but valid IDs and outcomes
        assert status_of(client, run) == "interrupted"  # nothing was cancelled
    with dashboard(tmp_path / "web.db", read_only=True) as reader:
        assert reader.get("/runs/bulk", params={"action": "cancel", "run": run}).status_code == 404
        token = csrf(reader)
        post = reader.post("/runs/bulk", data={"csrf": token, "action": "cancel", "seen": seen})
        assert post.status_code in (404, 405)
        assert 'id="bulk"' not in reader.get("/runs").text  # no boxes, no buttons
        assert reader.get(f"/runs/{run}/time").status_code == 200  # reading is allowed
        assert status_of(reader, run) == "interrupted"


def test_a_tenant_cannot_time_or_bulk_act_on_another_sessions_runs(tmp_path: Path) -> None:
    with dashboard(tmp_path / "web.db", tokens=TOKENS) as client:
        client.headers["authorization"] = f"Bearer {ALICE}"
        hers = start(client, "document_review", "v1", **DOC)
        erring = start(client, "flaky", "v1", title="tenant-1")
        wait_for(client, hers, "interrupted")
        wait_for(client, erring, "interrupted")
        _, her_seen, _ = _plan(client, "cancel", hers, erring)

        client.headers["authorization"] = f"Bearer {BOB}"
        assert client.get(f"/runs/{hers}/time").status_code == 404
        token, seen, applies = _plan(client, "cancel", hers, erring)
        assert applies == {hers: "no", erring: "no"} and seen == []
        page = client.get("/runs/bulk", params=[("action", "cancel"), ("run", hers)]).text
        assert "not found in this session" in page and "document_review" not in page
        for action in ("cancel", "retry"):  # a forged form naming her runs as she saw them
            response = client.post(
                "/runs/bulk", data={"csrf": token, "action": action, "seen": her_seen}
            )
            assert _report(client, response) == {hers: "not_found", erring: "not_found"}
        claimed = client.get("/runs/bulk/done", params=[("r", f"{hers}:cancelled")]).text
        assert "not found in this session" in claimed and "status-interrupted" not in claimed

        client.headers["authorization"] = f"Bearer {ALICE}"
        assert status_of(client, hers) == status_of(client, erring) == "interrupted"
