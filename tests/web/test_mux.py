"""``GET /events``: several page streams in one (`flowledger.web.mux`), what a browser's
tabs share. Read with an HTTP client from ``flowledger web`` (`WebServer`) with two
tokens, on a real SQLite file: each part's events tagged with its position, a bad
request refused whole with what is wrong, a part naming another session's run refused
alone, and nothing of the other session ever sent."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from .inprocess import DEADLINE, Served

pytestmark = pytest.mark.slow

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
TOKENS = {
    ALICE: "11111111-1111-4111-8111-111111111111",
    BOB: "22222222-2222-4222-8222-222222222222",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("mux") / "mux.db", TOKENS) as running:
        yield running


def _client(served: Served, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=served.url, timeout=DEADLINE, headers={"authorization": f"Bearer {token}"}
    )


def _start(client: httpx.Client, flag: Path) -> str:
    page = client.get("definitions/waiter/v1").text
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match is not None
    started = client.post(
        "definitions/waiter/v1/start", data={"csrf": match.group(1), "path": str(flag)}
    )
    assert started.status_code == 303, started.text
    return str(started.headers["location"].rsplit("/", 1)[1])


def _events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line:
            key, _, value = line.partition(": ")
            fields[key] = value
        elif "event" in fields:
            yield fields["event"], json.loads(fields["data"])
            fields = {}


def test_parts_are_tagged_and_follow_their_cursors(served: Served, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    try:
        _two_parts(served, flag)
    finally:
        flag.touch()  # the run ends, whatever failed


def _two_parts(served: Served, flag: Path) -> None:
    with _client(served, ALICE) as alice:
        run_id = _start(alice, flag)
        subs = [f"/events/runs/{run_id}?after=", "/events/runs?status=completed"]
        seen: list[tuple[str, int]] = []
        ids: list[str] = []
        with alice.stream("GET", "events", params={"sub": subs}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            for event, data in _events(response):
                seen.append((event, data["sub"]))
                if event == "activity":
                    assert data["sub"] == 0 and data["id"].split(":")[0].isdigit()
                    ids.append(data["id"])
                if event == "run" and not flag.exists():
                    assert data["sub"] == 0 and data["id"] is None
                    flag.touch()  # the run completes: its row reaches the table part
                if event == "row":
                    assert data["sub"] == 1 and data["data"]["run_id"] == run_id
                    assert "status-completed" in data["data"]["html"]
                    break
        assert ("activity", 0) in seen and len(ids) == len(set(ids))
        # from the last cursor on: only what came after it
        later = {"sub": f"/events/runs/{run_id}?after={ids[-1]}"}
        with alice.stream("GET", "events", params=later) as again:
            for event, data in _events(again):
                assert event != "activity" or data["id"] not in ids
                if event == "run":
                    assert data["data"]["status"] == "completed"
                    break


def test_a_bad_request_is_refused_whole(served: Served) -> None:
    with _client(served, ALICE) as alice:
        none = alice.get("events")
        assert none.status_code == 400 and "1..20 sub streams" in none.text
        many = alice.get("events", params={"sub": ["/events/runs"] * 21})
        assert many.status_code == 400 and "1..20 sub streams" in many.text
    with httpx.Client(base_url=served.url, timeout=DEADLINE) as anonymous:
        refused = anonymous.get("events", params={"sub": "/events/runs"})
        assert refused.status_code == 401 and "sign in" in refused.text


def test_a_part_of_another_session_is_refused_and_nothing_of_it_is_sent(
    served: Served, tmp_path: Path
) -> None:
    flag = tmp_path / "go"
    try:
        _bob_asks_for_alices_run(served, tmp_path, flag)
    finally:
        flag.touch()
        (tmp_path / "alice-go").touch()


def _bob_asks_for_alices_run(served: Served, tmp_path: Path, flag: Path) -> None:
    with _client(served, ALICE) as alice, _client(served, BOB) as bob:
        theirs = _start(alice, tmp_path / "alice-go")
        subs = [
            f"/events/runs/{theirs}?after=",  # another session's run
            "http://127.0.0.1/events/runs",  # not a path of this server
            f"/runs/{theirs}",  # not a stream
            "/events/runs/not-a-run",
            f"/events/runs/{theirs}?after=x",
            "/events/runs",  # bob's own runs table
        ]
        with bob.stream("GET", "events", params={"sub": subs}) as response:
            assert response.status_code == 200
            refused: dict[int, tuple[int, str]] = {}
            mine = ""
            for event, data in _events(response):
                # a refusal names only what bob asked for; nothing else names alice's run
                assert event == "refused" or theirs not in json.dumps(data)
                if event == "refused":
                    refused[data["sub"]] = (data["status"], data["message"])
                    if len(refused) == 5:
                        mine = _start(bob, flag)
                elif event == "row" and data["data"]["run_id"] == mine:
                    assert data["sub"] == 5
                    break
        assert refused[0] == (404, f"get run: run {theirs} not found")
        assert refused[1] == (400, "a sub stream is a path on this server")
        assert refused[2][0] == 404 and "no stream at" in refused[2][1]
        assert refused[3][0] == 404 and "a run ID is a UUID" in refused[3][1]
        # the cursor is checked first: the answer says nothing of the run
        assert refused[4] == (400, "the stream's cursor must be <revision>:<event id>")
