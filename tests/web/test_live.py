"""The live streams of a real ``flowledger web`` subprocess, read with an HTTP client:
every activity once, in order, and a reconnect with ``Last-Event-ID`` resumes exactly
after the last event it saw."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from .servers import APP, REPO, cli, web_server

pytestmark = pytest.mark.slow

DEADLINE = 60.0  # only catches a hang


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with web_server(tmp_path_factory.mktemp("live") / "live.db") as url:
        yield url


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=DEADLINE) as c:
        yield c


def _csrf(client: httpx.Client, path: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', client.get(path).text)
    assert match is not None
    return match.group(1)


def _status(client: httpx.Client, run_id: str) -> str:
    match = re.search(
        r'<dd><span class="status status-([a-z]+)"', client.get(f"runs/{run_id}").text
    )
    assert match is not None
    return match.group(1)


def _wait(client: httpx.Client, run_id: str, status: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while _status(client, run_id) != status:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _events(
    client: httpx.Client, path: str, count: int, headers: dict[str, str] | None = None
) -> list[tuple[str, str, Any]]:
    """The first ``count`` ``activity`` events of a stream: (id, event, data)."""
    out: list[tuple[str, str, Any]] = []
    with client.stream("GET", path, headers=headers or {}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if fields.get("event") == "activity":
                out.append((fields["id"], "activity", json.loads(fields["data"])))
                if len(out) == count:
                    return out
            fields = {}
    raise AssertionError("the stream ended")


def _event_ids(client: httpx.Client, run_id: str) -> list[str]:
    return re.findall(r'<tr data-event="([0-9a-f-]+)"', client.get(f"runs/{run_id}").text)


def test_reconnect_resumes_after_the_last_event_without_duplicates_or_gaps(
    client: httpx.Client,
) -> None:
    token = _csrf(client, "definitions/document_review/v1")
    started = client.post(
        "definitions/document_review/v1/start",
        data={"csrf": token, "title": "Live", "document": "One. Two."},
    )
    assert started.status_code == 303
    run_id = started.headers["location"].rsplit("/", 1)[1]
    _wait(client, run_id, "interrupted")
    history = _event_ids(client, run_id)
    assert len(history) == 7
    first = _events(client, f"events/runs/{run_id}?after=", 3)
    assert [data["html"].split('"')[1] for _, _, data in first] == history[:3]
    last_id = first[-1][0]
    assert last_id.endswith(":" + history[2])
    rest = _events(client, f"events/runs/{run_id}", 4, headers={"last-event-id": last_id})
    assert [data["html"].split('"')[1] for _, _, data in rest] == history[3:]
    # From the end, while the run moves on: exactly the new activities.
    end = rest[-1][0]
    resumed = client.post(f"runs/{run_id}/resume", data={"csrf": token, "approved": "false"})
    assert resumed.status_code == 303
    _wait(client, run_id, "completed")
    after = _event_ids(client, run_id)
    new = _events(client, f"events/runs/{run_id}", len(after) - 7, headers={"last-event-id": end})
    assert [data["html"].split('"')[1] for _, _, data in new] == after[7:]
    assert "run completed" in new[-1][2]["html"]


def test_the_runs_stream_sends_rows_updated_after_its_mark(client: httpx.Client) -> None:
    page = client.get("runs").text
    match = re.search(r'data-stream="([^"]+)"', page)
    assert match is not None
    stream = match.group(1).replace("&amp;", "&")
    token = _csrf(client, "definitions/kinds/v1")
    with client.stream("GET", stream) as response:
        assert response.status_code == 200
        started = client.post("definitions/kinds/v1/start", data={"csrf": token, "count": "1"})
        run_id = started.headers["location"].rsplit("/", 1)[1]
        for line in response.iter_lines():
            if line.startswith("data: ") and run_id in line:
                row = json.loads(line.removeprefix("data: "))
                assert row["run_id"] == run_id and f'data-run="{run_id}"' in row["html"]
                break


def test_unknown_run_and_bad_cursor(client: httpx.Client) -> None:
    missing = "00000000-0000-4000-8000-000000000009"
    assert client.get(f"events/runs/{missing}").status_code == 404
    assert client.get("events/runs/x").status_code == 404
    assert client.get("runs", headers={"host": "evil.example"}).status_code == 400


def test_read_only_follows_runs_another_process_executes(tmp_path: Path) -> None:
    db = tmp_path / "beside.db"
    first = cli(db, "start", "kinds", "v1", "--input", '{"count": 1}')
    assert first.returncode == 0, first.stderr  # the database exists now
    with web_server(db, "--read-only") as url, httpx.Client(base_url=url, timeout=DEADLINE) as c:
        match = re.search(r'data-stream="([^"]+)"', c.get("runs").text)
        assert match is not None
        with c.stream("GET", match.group(1).replace("&amp;", "&")) as response:
            assert response.status_code == 200
            owner = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "flowledger",
                    "start",
                    "document_review",
                    "v1",
                    "--json",
                    "--db",
                    f"sqlite:///{db}",
                    "--app",
                    APP,
                    "--input",
                    json.dumps({"title": "Elsewhere", "document": "Hi."}),
                ],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                out, err = owner.communicate(timeout=DEADLINE)
            finally:
                if owner.poll() is None:
                    owner.kill()
            assert owner.returncode == 0, err
            run_id = json.loads(out.strip().splitlines()[-1])["run_id"]
            for line in response.iter_lines():
                if line.startswith("data: ") and run_id in line and "interrupted" in line:
                    break
