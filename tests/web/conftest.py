"""Fixtures of the dashboard's TestClient tests: a `Dashboard` over a real SQLite file,
served in the TestClient's event loop (so the session it owns executes runs there)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool

from . import web_app

BASE = "http://127.0.0.1"
DEADLINE = 60.0  # only catches a hang


@contextmanager
def dashboard(
    db: Path,
    *,
    read_only: bool = False,
    tokens: Mapping[str, str] | None = None,
    loopback: bool = True,
) -> Iterator[TestClient]:
    pool = SessionPool(f"sqlite:///{db}", web_app.catalog(), read_only=read_only)
    gate = Gate(tokens or {}, loopback=loopback)
    app = Dashboard(pool, gate, read_only=read_only).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            yield client
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "web.db"


@pytest.fixture
def client(db: Path) -> Iterator[TestClient]:
    with dashboard(db) as c:
        yield c


def csrf(client: TestClient, path: str = "/runs") -> str:
    page = client.get(path)
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    if match is not None:
        return match.group(1)
    cookie = client.cookies.get("fl_csrf")
    assert cookie, "no CSRF cookie was set"
    return cookie


def start(client: TestClient, name: str, version: str, **fields: str) -> str:
    token = csrf(client, f"/definitions/{name}/{version}")
    response = client.post(f"/definitions/{name}/{version}/start", data={"csrf": token, **fields})
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert location.startswith("/runs/")
    return location.removeprefix("/runs/")


def status_of(client: TestClient, run_id: str) -> str:
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200, page.text
    match = re.search(r'<dd><span class="status status-([a-z]+)"', page.text)
    assert match is not None
    return match.group(1)


def wait_for(client: TestClient, run_id: str, *statuses: str) -> str:
    deadline = time.monotonic() + DEADLINE
    while True:
        current = status_of(client, run_id)
        if current in statuses:
            return current
        assert time.monotonic() < deadline, f"run {run_id} stayed {current}"
        time.sleep(0.05)


Starter = Callable[..., str]
