"""A deployed run's panels on the run page (pinned environment, readiness and its
Revalidate form, trace slices), the deployments and artifacts on the definitions page,
and their error paths, through Starlette's TestClient on a real SQLite database with the
real ``mcp-server-time`` as the deployment's source."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool

from . import web_app
from .conftest import BASE, csrf, start, wait_for
from .deployed import ARTIFACT, SECRET, SECRET_NAME, SECRET_VALUE, deployment, register


@contextmanager
def served(db: Path, *, read_only: bool = False) -> Iterator[tuple[TestClient, SessionPool]]:
    register(db)  # the operator's source, before the dashboard serves the database
    pool = SessionPool(f"sqlite:///{db}", web_app.catalog(), read_only=read_only)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=read_only).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            yield client, pool
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]


def deploy_call(client: TestClient, pool: SessionPool, name: str, arguments: Any) -> Any:
    async def call() -> Any:
        return await (await pool.get(None)).deploy.call(name, arguments)

    return client.portal.call(call)  # type: ignore[union-attr]


def paused_deployed_run(client: TestClient, pool: SessionPool) -> str:
    deploy_call(client, pool, "artifact_save", {"document": ARTIFACT})
    deploy_call(client, pool, "deployment_save", {"document": deployment()})
    started = deploy_call(client, pool, "run_deployment", {"deployment": "clock_dep", "input": {}})
    assert started["status"] == "interrupted", started
    return str(started["run_id"])


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_NAME, SECRET_VALUE)


def test_a_deployed_run_shows_its_pin_readiness_and_trace(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        page = client.get(f"/runs/{run_id}")
        assert page.status_code == 200, page.text
        text = page.text
        assert 'id="pinned"' in text and "clock_dep" in text and "revision 1" in text
        assert "clock_sign_off" in text and "version 1" in text
        assert "mcp-server-time" in text and "WEB_TOKEN" in text  # the transport fields
        assert SECRET in text and SECRET_VALUE not in text  # the name, never the value
        assert "get_current_time" in text  # the pinned tool
        assert 'id="readiness-status">ready<' in text and "sources were not contacted" in text
        assert 'action="/runs/' + run_id + '/revalidate"' in text
        assert 'id="trace"' in text
        # regression: the picture was looked up in the application's catalog, which has
        # no deployed definitions (they live in each session's), so there was none
        assert '<svg class="graph"' in text
        assert 'data-vertex="ask" data-state="paused"' in text
        assert "finish__" not in text  # the synthetic finish vertex is not drawn
        assert 'data-vertex="done"' in text

        token = csrf(client, f"/runs/{run_id}")
        again = client.post(f"/runs/{run_id}/revalidate", data={"csrf": token})
        assert again.status_code == 200, again.text
        assert 'id="readiness-status">ready<' in again.text
        assert "revalidated against the pinned sources" in again.text
        assert SECRET_VALUE not in again.text

        definitions = client.get("/definitions").text
        assert "<h2>Deployments</h2>" in definitions and "clock_dep" in definitions
        assert "<h2>Artifacts</h2>" in definitions and "clock_sign_off" in definitions


def test_revalidate_shows_a_blocked_readiness_with_its_diagnostics(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        token = csrf(client, f"/runs/{run_id}")
        # the pinned secret is gone from the environment: the revalidation names it
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv(SECRET_NAME)
            # a page load checks the graph only: it never connects to the sources
            loaded = client.get(f"/runs/{run_id}").text
            assert 'id="readiness-status">ready<' in loaded
            assert "sources were not contacted" in loaded
            blocked = client.post(f"/runs/{run_id}/revalidate", data={"csrf": token})
        assert blocked.status_code == 200, blocked.text
        assert 'id="readiness-status">blocked<' in blocked.text
        assert 'class="diagnostics"' in blocked.text and SECRET_NAME in blocked.text
        header = blocked.text.split('id="header"', 1)[1].split("</section>", 1)[0]
        assert "blocked" in header  # the header shows the revalidated readiness too


def test_trace_slices_are_bounded_like_read_run_trace(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        trace = deploy_call(client, pool, "read_run_trace", {"run_id": run_id})
        total = trace["total"]
        page = client.get(f"/runs/{run_id}", params={"trace_start": "0", "trace_limit": "1"})
        assert page.status_code == 200
        rows = re.findall(r"<tr><td>(\d+)</td>", page.text.split('id="trace"', 1)[1])
        assert len(rows) == min(1, total)
        if total > 1:
            assert 'id="trace-later"' in page.text
        beyond = client.get(f"/runs/{run_id}", params={"trace_start": "99999"})
        assert beyond.status_code == 200 and "No entries from 99999" in beyond.text
        for params in (
            {"trace_limit": "0"},
            {"trace_limit": "101"},
            {"trace_limit": "x"},
            {"trace_start": "-1"},
        ):
            refused = client.get(f"/runs/{run_id}", params=params)
            assert refused.status_code == 400, params


def test_a_run_of_an_app_definition_has_no_deploy_panels(db: Path) -> None:
    with served(db) as (client, _pool):
        run_id = start(client, "kinds", "v1", count="1")
        wait_for(client, run_id, "completed")
        page = client.get(f"/runs/{run_id}").text
        for panel in ('id="pinned"', 'id="readiness"', 'id="trace"', "/revalidate"):
            assert panel not in page
        token = csrf(client, f"/runs/{run_id}")
        refused = client.post(f"/runs/{run_id}/revalidate", data={"csrf": token})
        assert refused.status_code == 409
        assert "not a deployed run" in refused.text
        assert "<h2>Deployments</h2>" not in client.get("/definitions").text


def test_revalidate_refuses_an_unknown_run_and_a_missing_csrf_field(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        token = csrf(client, f"/runs/{run_id}")
        unknown = "00000000-0000-4000-8000-000000000001"
        assert client.post(f"/runs/{unknown}/revalidate", data={"csrf": token}).status_code == 404
        assert client.post("/runs/nope/revalidate", data={"csrf": token}).status_code == 404
        assert client.get(f"/runs/{unknown}").status_code == 404
        missing = client.post(f"/runs/{run_id}/revalidate", data={})
        assert missing.status_code == 403 and "CSRF" in missing.text
        wrong = client.post(f"/runs/{run_id}/revalidate", data={"csrf": "wrong"})
        assert wrong.status_code == 403


def test_read_only_shows_the_panels_without_revalidate(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
    with served(db, read_only=True) as (client, _pool):
        page = client.get(f"/runs/{run_id}")
        assert page.status_code == 200, page.text
        assert 'id="pinned"' in page.text and "clock_dep" in page.text
        assert 'id="readiness-status">ready<' in page.text
        assert "/revalidate" not in page.text
        token = csrf(client, f"/runs/{run_id}")
        refused = client.post(f"/runs/{run_id}/revalidate", data={"csrf": token})
        assert refused.status_code in (404, 405)


def test_the_start_form_of_a_deployment_revision_pins_the_run(db: Path) -> None:
    """Regression: the form started a deployment revision as a plain run, with no pin, so
    it failed at its first node; it now starts it as run_deployment does."""
    with served(db) as (client, pool):
        deploy_call(client, pool, "artifact_save", {"document": ARTIFACT})
        deploy_call(client, pool, "deployment_save", {"document": deployment()})
        listed = client.get("/definitions").text
        assert 'href="/definitions/clock_dep/r1"' in listed  # the live revision's start page
        assert "<title>Definitions" in listed and "<title>Definitions<h2>" not in listed
        token = csrf(client, "/definitions/clock_dep/r1")
        started = client.post(
            "/definitions/clock_dep/r1/start", data={"csrf": token}, follow_redirects=False
        )
        assert started.status_code == 303, started.text
        run_id = started.headers["location"].rsplit("/", 1)[1]
        assert wait_for(client, run_id, "interrupted", "failed") == "interrupted"
        page = client.get(f"/runs/{run_id}").text
        assert 'id="pinned"' in page and "clock_dep" in page

        with pytest.MonkeyPatch.context() as patch:
            patch.delenv(SECRET_NAME)  # the environment cannot be validated: nothing starts
            refused = client.post("/definitions/clock_dep/r1/start", data={"csrf": token})
        assert refused.status_code == 400, refused.text
        assert "the deployment cannot run" in refused.text and SECRET_NAME in refused.text


def test_an_artifact_page_shows_what_it_declares_and_its_graph(db: Path) -> None:
    with served(db) as (client, pool):
        deploy_call(client, pool, "artifact_save", {"document": ARTIFACT})
        listed = client.get("/definitions").text
        assert 'href="/artifacts/clock_sign_off/1"' in listed
        page = client.get("/artifacts/clock_sign_off/1")
        assert page.status_code == 200, page.text
        text = page.text
        # a heading that reads as a name and a version, not as "clock_sign_off 1 artifact"
        assert "<h1>Artifact clock_sign_off, version 1</h1>" in text
        assert "<title>Artifact clock_sign_off, version 1 · flowledger</title>" in text
        assert "Ask a person to approve, then read the time server" in text  # description
        assert '<svg class="graph"' in text and 'data-vertex="ask"' in text
        assert "Resume schemas" in text and "approved" in text
        assert "additionalProperties" in text  # the input and output schemas
        missing = client.get("/artifacts/clock_sign_off/9")
        assert missing.status_code == 404 and "clock_sign_off@9" in missing.text


def test_the_definitions_page_lists_every_deployment(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: deployment_list answers a page (50 by default); the page showed only
    the first one. It now reads page after page (a page of 20 here: three pages)."""
    monkeypatch.setattr("flowledger.web.app.DEPLOYMENT_PAGE", 20)
    with served(db) as (client, pool):
        deploy_call(client, pool, "artifact_save", {"document": ARTIFACT})
        for index in range(55):
            deploy_call(
                client,
                pool,
                "deployment_save",
                {"document": {**deployment(), "name": f"d{index:02}"}},
            )
        listed = client.get("/definitions").text
        for index in range(55):
            assert f'href="/definitions/d{index:02}/r1"' in listed


def test_a_finished_deployed_run_has_no_revalidate(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        token = csrf(client, f"/runs/{run_id}")
        cancelled = client.post(f"/runs/{run_id}/cancel", data={"csrf": token, "reason": "done"})
        assert cancelled.status_code == 303
        page = client.get(f"/runs/{run_id}").text
        assert 'id="readiness"' in page and "/revalidate" not in page
        refused = client.post(f"/runs/{run_id}/revalidate", data={"csrf": token})
        assert refused.status_code == 409
        assert "cancelled: it never resumes, so there is nothing to revalidate" in refused.text


def test_a_deployed_run_reads_in_words_not_raw_values(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        page = client.get(f"/runs/{run_id}").text
        tools = page[
            page.index('<table class="tools">') : page.index(
                "</table>", page.index('<table class="tools">')
            )
        ]
        cells = re.findall(r"<td>([^<]*)</td>", tools)
        assert cells and set(cells) <= {"yes", "no", "not declared"}, cells
        token = csrf(client, f"/runs/{run_id}")
        cancelled = client.post(f"/runs/{run_id}/cancel", data={"csrf": token, "reason": "x"})
        assert cancelled.status_code == 303
        finished = client.get(f"/runs/{run_id}").text
        shown = re.findall(r">([^<]+)<", finished)  # the text, not attribute values
        assert not [text for text in shown if "not_applicable" in text or "not needed" in text]
        assert "not applicable: only a paused run resumes" in finished


def test_the_trace_has_time_result_and_labels_and_the_data_page_the_output(db: Path) -> None:
    with served(db) as (client, pool):
        run_id = paused_deployed_run(client, pool)
        token = csrf(client, f"/runs/{run_id}")
        resumed = client.post(f"/runs/{run_id}/resume", data={"csrf": token, "approved": "true"})
        assert resumed.status_code == 303, resumed.text
        wait_for(client, run_id, "completed")
        trace = client.get(f"/runs/{run_id}").text.split('id="trace"', 1)[1]
        head = trace.split("</thead>", 1)[0]
        for column in ("<th>Started</th>", "<th>Took</th>", "<th>Result</th>", "<th>Error</th>"):
            assert column in head
        rows = trace.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("</tr>")
        clock = next(row for row in rows if "clock.get_current_time" in row)
        # the graph's label, with the node id beside it
        assert 'class="trace-node">Read the clock <span class="mono muted">clock</span>' in clock
        assert re.search(r'class="trace-time"><time datetime="[^"]+">[^<]+ UTC</time>', clock)
        assert re.search(r'class="trace-took">\d+(\.\d)? (ms|s|min)<', clock)
        assert "Etc/UTC" in clock  # the tool's result
        assert 'class="trace-error"></td>' in clock
        data = client.get(f"/runs/{run_id}/data").text
        assert 'id="outcome">answered<' in data
        output = data.split('id="output"', 1)[1]
        assert "&#34;approved&#34;: true" in output or '"approved": true' in output
        assert "this dashboard" in data  # who answered the pause
