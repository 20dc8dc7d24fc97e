"""A fork's confirmation asks only about steps that call a tool not pinned read-only
(issue #31, "forks that mean what they say"), and a fork's progress counts its own steps.
Through the dashboard's HTTP front door on a real SQLite file, with a registered Python
source whose ``look`` the operator declared read-only and whose ``write`` is not; both
append to a file, so the test counts the calls each fork made."""

from __future__ import annotations

import re
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from flowledger.web import Dashboard, Gate, SessionPool

from . import web_app
from .conftest import BASE, csrf, start, wait_for
from .registered import run

ARTIFACT = """
format: flowledger.artifact/v1
name: files_flow
version: "1"
input_schema:
  type: object
  additionalProperties: false
  required: [path]
  properties: {path: {type: string}}
output_schema: {type: object, additionalProperties: false, properties: {}}
dependencies:
  files: {tools: [look, write]}
start: first_look
nodes:
  first_look:
    kind: tool
    label: Look first
    dependency: files
    tool: look
    arguments: {path: "${ input.path }"}
    next: write_it
  write_it:
    kind: tool
    label: Write the file
    dependency: files
    tool: write
    arguments: {path: "${ input.path }"}
    next: look_again
  look_again:
    kind: tool
    label: Look again
    dependency: files
    tool: look
    arguments: {path: "${ input.path }"}
    next: done
  done:
    kind: end
    outcome: done
    output: {}
"""

MODULE = """
def look(path: str) -> int:
    with open(path, "a") as out:
        out.write("look\\n")
    return 0


def write(path: str) -> int:
    with open(path, "a") as out:
        out.write("write\\n")
    return 0
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"fl_web_files_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


async def _register(db: Path, module: str) -> None:
    async with open_store(f"sqlite:///{db}") as store:
        await SourceRegistry.over(store).put(
            {
                "format": "flowledger.source/v1",
                "name": "files",
                "python": {"module": module, "read_only": ["look"]},
            }
        )


def _deploy(client: TestClient, pool: SessionPool, name: str, arguments: Any) -> Any:
    async def call() -> Any:
        return await (await pool.get(None)).deploy.call(name, arguments)

    return client.portal.call(call)  # type: ignore[union-attr]


def _revision_of(client: TestClient, run_id: str, label: str) -> str:
    page = client.get(f"/runs/{run_id}").text
    for row in re.findall(r"<tr data-event=.*?</tr>", page, re.S):
        if f"<td>{label}</td>" in row:
            found = re.search(r"fork\?revision=(\d+)", row)
            assert found is not None
            return found[1]
    raise AssertionError(f"no timeline row for {label!r}")


def _calls(path: Path) -> list[str]:
    return path.read_text().split()


def test_a_fork_asks_only_about_steps_that_call_a_tool_not_read_only(
    tmp_path: Path, module: str
) -> None:
    db, calls = tmp_path / "web.db", tmp_path / "calls.txt"
    run(_register(db, module))
    pool = SessionPool(f"sqlite:///{db}", web_app.catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            _deploy(client, pool, "artifact_save", {"document": ARTIFACT})
            deployment = {
                "format": "flowledger.deployment/v1",
                "name": "files_dep",
                "artifact": {"name": "files_flow", "version": "1"},
                "sources": {"files": {"source": "files", "allow_tools": ["look", "write"]}},
            }
            _deploy(client, pool, "deployment_save", {"document": deployment})
            started = _deploy(
                client,
                pool,
                "run_deployment",
                {"deployment": "files_dep", "input": {"path": str(calls)}},
            )
            origin = str(started["run_id"])
            wait_for(client, origin, "completed")
            assert _calls(calls) == ["look", "write", "look"]
            # the time page draws the deployed run's tool calls beside its vertices
            timeline = client.get(f"/runs/{origin}/time").text
            tools = re.findall(r'<rect class="bar bar-tool"[^>]*data-vertex="(\w+)"', timeline)
            assert sorted(tools) == ["first_look", "look_again", "write_it"], tools  # by lane
            assert ">files/write<" in timeline and ">files/look<" in timeline

            # after "Write the file": only "Look again" (read-only) and the end run again
            after_write = _revision_of(client, origin, "Write the file")
            page = client.get(f"/runs/{origin}/fork", params={"revision": after_write}).text
            assert re.search(r'data-vertex="look_again" data-asks="no"', page)
            assert 'id="f-confirm"' not in page
            token = csrf(client, f"/runs/{origin}/fork?revision={after_write}")
            forked = client.post(
                f"/runs/{origin}/fork", data={"csrf": token, "revision": after_write}
            )
            assert forked.status_code == 303, forked.text
            fork = forked.headers["location"].rsplit("/", 1)[1]
            wait_for(client, fork, "completed")
            assert _calls(calls) == ["look", "write", "look", "look"]  # no second write
            header = client.get(f"/runs/{fork}").text
            # its own steps: "Look again" and the end (and the hidden finish) of the
            # graph's five, less the two its origin finished before the fork point
            own = re.search(r'title="(\d+) of (\d+) vertices completed"', header)
            assert own is not None and own[1] == own[2], own
            assert int(own[2]) < 5 and 'id="fork-progress"' in header

            # after "Look first": "Write the file" runs again, so the fork asks first
            after_look = _revision_of(client, origin, "Look first")
            page = client.get(f"/runs/{origin}/fork", params={"revision": after_look}).text
            assert re.search(r'data-vertex="write_it" data-asks="yes"', page)
            assert re.search(r'data-vertex="look_again" data-asks="no"', page)
            assert 'id="f-confirm"' in page
            refused = client.post(
                f"/runs/{origin}/fork", data={"csrf": token, "revision": after_look}
            )
            assert refused.status_code == 400 and "Run these steps again" in refused.text
            assert _calls(calls) == ["look", "write", "look", "look"]  # nothing forked
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]


def test_a_python_definitions_fork_still_asks_and_counts_its_own_steps(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    pool = SessionPool(f"sqlite:///{tmp_path / 'web.db'}", web_app.catalog(), read_only=False)
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            origin = start(client, "gates", "v1", path=str(gate))
            Path(f"{gate}.1").touch()
            Path(f"{gate}.2").touch()
            wait_for(client, origin, "completed")
            after_one = _revision_of(client, origin, "one")
            page = client.get(f"/runs/{origin}/fork", params={"revision": after_one}).text
            assert 'id="f-confirm"' in page  # a Python step's calls are unknown: it asks
            token = csrf(client, f"/runs/{origin}/fork?revision={after_one}")
            forked = client.post(
                f"/runs/{origin}/fork",
                data={"csrf": token, "revision": after_one, "confirm": "yes"},
            )
            assert forked.status_code == 303, forked.text
            fork = forked.headers["location"].rsplit("/", 1)[1]
            wait_for(client, fork, "completed")
            header = client.get(f"/runs/{fork}").text.split('id="header"')[1]
            assert 'title="2 of 2 vertices completed"' in header  # not 2 of 3
            assert "1 finished before the fork" in header
            listed = client.get("/runs").text
            row = re.search(rf'<tr data-run="{fork}">(.*?)</tr>', listed, re.S)
            assert row is not None and "2/2" in row[1]
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]
