"""The Sources pages (``/sources``, ``/sources/{name}``) through Starlette's TestClient on
a real SQLite file whose source registry the operator filled before the dashboard
opened it, with the real ``mcp-server-time`` as the registered ``clock``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from flowledger.web import Dashboard, Gate, SessionPool, sources
from flowledger.workflows.runtime.session import default_session_id

from . import web_app
from .conftest import BASE, dashboard
from .deployed import ARTIFACT
from .registered import (
    PROBED_AT,
    SCRIPT,
    SECRET_VALUE,
    SECRET_VAR,
    SENTINEL,
    clock,
    deployment,
    failed_probe,
    hostile,
    last_probe,
    launcher,
    listing_probe,
    register,
    run,
)

OTHER_SESSION = "99999999-9999-4999-8999-999999999999"
GONE_RUN = "00000000-0000-4000-8000-000000000001"
LONG_ERROR = "MCP source http://127.0.0.1:9/mcp is unreachable: <b>refused</b> " + "x" * 300


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET_VALUE)


@contextmanager
def served(db: Path) -> Iterator[tuple[TestClient, SessionPool]]:
    pool = SessionPool(f"sqlite:///{db}", web_app.catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            yield client, pool
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]


def deploy_call(client: TestClient, pool: SessionPool, name: str, arguments: Any) -> Any:
    async def call() -> Any:
        return await (await pool.get(None)).deploy.call(name, arguments)

    return client.portal.call(call)  # type: ignore[union-attr]


def paused_run(client: TestClient, pool: SessionPool) -> str:
    started = deploy_call(client, pool, "run_deployment", {"deployment": "clock_reg", "input": {}})
    assert started["status"] == "interrupted", started
    return str(started["run_id"])


def body(page: Any) -> str:
    """The page's main element (the navigation is the same on every page)."""
    return str(page.text).split("<main>", 1)[1]


def cells(row: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]


def change(db: Path, document: dict[str, Any]) -> None:
    """Save ``document`` as its registered source's next revision, as the operator would."""

    async def save() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            await SourceRegistry.over(store).set(document)

    run(save())


def test_the_sources_pages_show_what_the_session_may_see_and_no_value(
    db: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "launched"
    register(
        db,
        [clock(), hostile(), launcher(marker), clock(sessions=[OTHER_SESSION], name="hidden")],
        probe=["clock"],
        recorded={"hostile": failed_probe(1, LONG_ERROR)},
        disabled=["hostile"],
    )
    hints = {
        t.name: ["yes" if t.read_only else "no", "yes" if t.idempotent else "no"]
        for t in last_probe(db, "clock").tools
    }
    with served(db) as (client, pool):
        deploy_call(client, pool, "artifact_save", {"document": ARTIFACT})
        deploy_call(client, pool, "deployment_save", {"document": deployment()})
        paused = paused_run(client, pool)
        finished = paused_run(client, pool)
        answered = deploy_call(
            client, pool, "resume_run", {"run_id": finished, "payload": {"approved": True}}
        )
        assert answered["status"] == "completed", answered

        runs = client.get("/runs")
        assert '<a href="/sources">Sources</a>' in runs.text  # the navigation

        listing = client.get("/sources")
        assert listing.status_code == 200, listing.text
        rows = dict(re.findall(r'<tr data-source="([a-z_]+)">(.*?)</tr>', listing.text, re.S))
        assert sorted(rows) == ["clock", "hostile", "launcher"]  # never "hidden"
        assert "hidden" not in body(listing)
        assert 'href="/sources/clock"' in rows["clock"]
        assert "The time server&#39;s clock." in rows["clock"]
        assert (
            "stdio" in rows["clock"] and "mcp-server-time --local-timezone Etc/UTC" in rows["clock"]
        )
        assert 'source-enabled">enabled<' in rows["clock"]
        assert 'class="probe-ok">ok<' in rows["clock"] and "<td>2</td>" in rows["clock"]
        assert "<td>1</td>" in rows["clock"]  # the revision
        # markup in a description is text; credentials in a URL are not shown
        assert SCRIPT not in listing.text
        assert "&lt;script&gt;alert(&#39;source&#39;)&lt;/script&gt;" in rows["hostile"]
        assert "http://127.0.0.1:9/mcp" in rows["hostile"] and "hunter2" not in listing.text
        assert 'source-disabled">disabled<' in rows["hostile"]
        error = re.search(r'class="probe-error" title="([^"]*)">error: ([^<]*)<', rows["hostile"])
        assert error is not None
        assert "&lt;b&gt;refused&lt;/b&gt;" in error.group(2) and len(error.group(2)) < 200
        assert error.group(1).endswith("x" * 300)  # the full text on hover
        assert "never probed" in rows["launcher"] and cells(rows["launcher"])[-1] == "\N{EN DASH}"
        probed = '<time datetime="' + PROBED_AT + '">2025-01-02 03:04:05 UTC</time>'
        assert probed in rows["hostile"]

        detail = client.get("/sources/clock")
        assert detail.status_code == 200, detail.text
        text = detail.text
        tools = dict(re.findall(r'<tr data-tool="([a-z_]+)">(.*?)</tr>', text, re.S))
        assert sorted(tools) == ["convert_time", "get_current_time"]
        fingerprints = re.findall(
            r'<span class="mono" title="sha256:([0-9a-f]{64})">([0-9a-f]{12})</span>',
            tools["get_current_time"],
        )
        assert len(fingerprints) == 2 and all(full[:12] == short for full, short in fingerprints)
        assert fingerprints[0][0] != fingerprints[1][0]  # contract and full differ
        # name, title, read-only, idempotent, contract, full, bindable (allow_tools)
        assert cells(tools["get_current_time"])[2:4] == hints["get_current_time"]
        assert cells(tools["convert_time"])[2:4] == hints["convert_time"]
        assert cells(tools["get_current_time"])[-1] == "yes"
        assert cells(tools["convert_time"])[-1] == "no"
        assert '<dd class="mono">CLOCK_MODE, WEB_TOKEN</dd>' in text  # names only
        assert '<dd class="mono">token</dd>' in text  # the secret's name
        bound = text.split('id="bound-by"', 1)[1].split("</section>", 1)[0]
        assert 'href="/definitions/clock_reg/r1"' in bound and "current" in bound
        pinned = text.split('id="pinned-runs"', 1)[1].split("</section>", 1)[0]
        assert f'href="/runs/{paused}"' in pinned and "status-interrupted" in pinned
        assert "at revision 1" in pinned
        assert finished not in pinned  # completed: not unfinished any more
        assert 'id="disabled-notice"' not in text

        disabled = client.get("/sources/hostile")
        assert disabled.status_code == 200
        notice = re.search(r'id="disabled-notice">(.*?)</p>', disabled.text, re.S)
        assert notice is not None
        assert "<code>flowledger source enable hostile</code>" in notice.group(1)
        assert "The last probe failed" in disabled.text
        assert '<dd class="mono">authorization, x-mode</dd>' in disabled.text  # names only
        assert "No live deployment of this session binds it." in disabled.text

        pages = [
            listing,
            detail,
            disabled,
            client.get("/sources/launcher"),
            runs,
            client.get(f"/runs/{paused}"),
            client.get("/definitions"),
        ]
        for page in pages:
            assert page.status_code == 200, page.url
            assert SENTINEL not in page.text and SECRET_VALUE not in page.text, page.url
            assert SECRET_VAR not in page.text, page.url  # which variable holds it: operator's
        assert not marker.exists()  # no page started a source

        for name in ("hidden", "unknown", "Not_A_Name", "a" * 65):
            refused = client.get(f"/sources/{name}")
            assert refused.status_code == 404, name
            message = re.search(r'id="page-error">([^<]*)<', refused.text)
            assert message is not None
            assert message.group(1) == (
                f"source &#39;{name}&#39; is not registered (sources are registered by the "
                "operator)"
            )


def test_another_token_does_not_see_a_source_of_one_session(db: Path) -> None:
    alice, bob = "alice-sources-token-01", "bob-sources-token-0002"
    alice_sid = "11111111-1111-4111-8111-111111111111"
    bob_sid = "22222222-2222-4222-8222-222222222222"
    register(db, [clock(sessions=[alice_sid], name="alices"), clock(name="shared")])
    with dashboard(db, tokens={alice: alice_sid, bob: bob_sid}) as client:
        as_alice = {"authorization": f"Bearer {alice}"}
        as_bob = {"authorization": f"Bearer {bob}"}
        assert client.get("/sources").status_code == 303  # sign in first
        assert client.get("/sources/shared").status_code == 303

        listed = client.get("/sources", headers=as_alice)
        assert 'data-source="alices"' in listed.text and 'data-source="shared"' in listed.text
        own = client.get("/sources/alices", headers=as_alice)
        assert own.status_code == 200 and alice_sid not in own.text  # who else sees it: no

        listed = client.get("/sources", headers=as_bob)
        assert 'data-source="shared"' in listed.text and "alices" not in body(listed)
        hidden = client.get("/sources/alices", headers=as_bob)
        unknown = client.get("/sources/alicex", headers=as_bob)
        assert hidden.status_code == unknown.status_code == 404
        assert body(hidden).replace("alices", "alicex") == body(unknown)  # no existence leak
        assert client.get("/sources/shared", headers=as_bob).status_code == 200


def test_a_read_only_dashboard_shows_the_sources(db: Path) -> None:
    tools = [{"name": "look", "title": "Look", "inputSchema": {"type": "object"}}]
    register(db, [clock()], recorded={"clock": listing_probe(1, tools)})
    with dashboard(db) as client:  # creates the default session's records
        assert client.get("/sources").status_code == 200
    # a later revision: the recorded probe is now of an earlier one, and says so
    changed = clock()
    changed["description"] = "Changed."
    change(db, changed)
    with dashboard(db, read_only=True) as client:
        listing = client.get("/sources")
        assert listing.status_code == 200 and "(of revision 1)" in listing.text
        detail = client.get("/sources/clock")
        assert detail.status_code == 200
        assert "As revision 1 listed them; the source is now at revision 2." in detail.text
        row = re.search(r'<tr data-tool="look">(.*?)</tr>', detail.text, re.S)
        assert row is not None
        assert cells(row.group(1))[:4] == ["look", "Look", "no", "no"]
        assert cells(row.group(1))[-1] == "no"  # not within allow_tools


def test_the_pinned_runs_checked_are_bounded_and_say_so(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(db, [clock()])
    with dashboard(db) as client:  # creates the default session
        assert client.get("/sources/clock").status_code == 200

    async def pin_gone_runs() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            session_id = await default_session_id(store)
            registry = SourceRegistry.over(store)
            for run_id in (GONE_RUN, "00000000-0000-4000-8000-000000000002"):
                await registry.add_use("clock", session_id, run_id, 1)
            await registry.add_use("clock", OTHER_SESSION, GONE_RUN, 1)  # not this session's

    run(pin_gone_runs())
    monkeypatch.setattr(sources, "MAX_PINNED_CHECKED", 1)
    with dashboard(db, read_only=True) as client:
        detail = client.get("/sources/clock")
        assert detail.status_code == 200
        pinned = detail.text.split('id="pinned-runs"', 1)[1].split("</section>", 1)[0]
        assert "No unfinished run of this session is pinned to it." in pinned  # runs gone
        assert "Only 1 of the 2 runs recorded as pinned to it were checked." in pinned
    monkeypatch.setattr(sources, "MAX_PINNED_CHECKED", 2)
    with dashboard(db, read_only=True) as client:
        assert 'id="uses-cut"' not in client.get("/sources/clock").text


def test_a_damaged_registry_record_is_a_500_that_names_nothing(db: Path) -> None:
    register(db, [clock(name="secretive")])

    async def damage() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            key = "deploy/registry/revisions/secretive/1"
            entry = await store.kv.get(key)
            await store.kv.put(key, b"{not json", expected=entry.revision)

    run(damage())
    with dashboard(db) as client:
        for path in ("/sources", "/sources/secretive"):
            page = client.get(path)
            assert page.status_code == 500, path
            assert "the source registry cannot be read" in page.text
            assert "secretive" not in body(page)


def test_python_builtin_and_openapi_sources_are_shown(db: Path) -> None:
    """Regression: the pages read a URL and secrets from every source that was not stdio,
    so a registered python or builtin source made /sources answer 500 (and an OpenAPI
    source read as a module named None)."""
    python_source = {
        "format": "flowledger.source/v1",
        "name": "helpers",
        "python": {"module": "json", "functions": ["dumps"], "read_only": ["dumps"]},
    }
    builtin_source = {"format": "flowledger.source/v1", "name": "std", "builtin": {}}
    openapi_source = {
        "format": "flowledger.source/v1",
        "name": "items",
        "openapi": {
            "document": "https://items.example/openapi.json",
            "base_url": "https://items.example/api",
            "operations": ["listItems"],
            "auth": {"header": "X-Api-Key", "secret": "items_key"},
        },
        "secrets": {"items_key": {"env": SECRET_VAR}},
    }
    register(db, [clock(), python_source, builtin_source, openapi_source])
    with dashboard(db, read_only=True) as client:
        listing = client.get("/sources")
        assert listing.status_code == 200
        assert "helpers" in listing.text and "std" in listing.text
        helpers = client.get("/sources/helpers")
        assert helpers.status_code == 200
        assert "json" in body(helpers) and "dumps" in body(helpers)
        std = client.get("/sources/std")
        assert std.status_code == 200 and "builtin" in body(std)
        items = body(client.get("/sources/items"))
        for shown in ("https://items.example/api", "openapi.json", "listItems", "X-Api-Key"):
            assert shown in items, shown
        assert "None" not in items and SECRET_VALUE not in items
