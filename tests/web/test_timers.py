"""The dashboard's run page of a parked run: a "parked until" label with the wake time,
no resume or retry (refused, nothing written), and a cancel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool

from ..workflows.timers._app import catalog
from .conftest import BASE, csrf, start, wait_for


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    pool = SessionPool(f"sqlite:///{tmp_path / 'timers.db'}", catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as c:
        try:
            yield c
        finally:
            c.portal.call(pool.close)  # type: ignore[union-attr]


def test_a_parked_run_page_shows_when_it_wakes_and_cannot_be_resumed(
    client: TestClient,
) -> None:
    run = start(client, "sleeper", "v1", seconds="3600")
    wait_for(client, run, "interrupted")
    page = client.get(f"/runs/{run}").text
    assert "Parked at take a nap" in page and "parked until <time>" in page
    assert f'action="/runs/{run}/resume"' not in page
    token = csrf(client, f"/runs/{run}")
    for action in ("resume", "retry"):
        refused = client.post(f"/runs/{run}/{action}", data={"csrf": token})
        assert refused.status_code == 409 and "resumes by itself" in refused.text
    assert "parked until" in client.get(f"/runs/{run}").text  # still parked
    cancelled = client.post(f"/runs/{run}/cancel", data={"csrf": token})
    assert cancelled.status_code == 303
    assert wait_for(client, run, "cancelled") == "cancelled"
