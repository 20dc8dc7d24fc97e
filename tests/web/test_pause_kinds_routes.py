"""The runs list's pause-kind filter and counts by status through Starlette's TestClient
on a real SQLite database: what each kind lists, a bad filter value refused with its
name (escaped), and one token's session that neither lists nor counts another's runs."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from .conftest import dashboard, start, wait_for

DOC = {"title": "Quarterly", "document": "Sales grew 12 percent."}


def _shown(page: str) -> set[str]:
    return set(re.findall(r'<tr data-run="([0-9a-f-]{36})"', page))


def _counts(page: str) -> dict[str, int]:
    found = re.findall(r'data-status="([a-z:]+)"[^>]*>[^<]*<strong>(\d+)</strong>', page)
    return {status: int(count) for status, count in found}


def test_filters_and_counts_tell_the_pause_kinds_apart(client: TestClient) -> None:
    errored = start(client, "flaky", "v1", title="routes-kinds")
    asked = start(client, "document_review", "v1", **DOC)
    done = start(client, "kinds", "v1", count="1")
    wait_for(client, errored, "interrupted")
    wait_for(client, asked, "interrupted")
    wait_for(client, done, "completed")
    everything = client.get("/runs").text
    assert _shown(everything) == {errored, asked, done}
    assert _counts(everything) == {
        "pending": 0,
        "queued": 0,
        "running": 0,
        "interrupted:request": 1,
        "interrupted:error": 1,
    }
    assert client.get("/runs", params={"status": "interrupted"}).status_code == 200
    assert _shown(client.get("/runs", params={"status": "interrupted"}).text) == {errored, asked}
    assert _shown(client.get("/runs", params={"status": "interrupted:error"}).text) == {errored}
    assert _shown(client.get("/runs", params={"status": "interrupted:request"}).text) == {asked}
    both = client.get("/runs", params={"status": "interrupted:error", "definition": "kinds"})
    assert _shown(both.text) == set() and "match these filters" in both.text
    # retried, the errored run finishes and leaves the count
    page = client.get(f"/runs/{errored}").text
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    retried = client.post(f"/runs/{errored}/retry", data={"csrf": token.group(1)})
    assert retried.status_code == 303
    wait_for(client, errored, "completed")
    after = client.get("/runs").text
    assert _counts(after)["interrupted:error"] == 0 and _counts(after)["interrupted:request"] == 1
    assert _shown(client.get("/runs", params={"status": "interrupted:error"}).text) == set()


def test_an_unknown_status_filter_is_refused_by_name(client: TestClient) -> None:
    for bad in ("interrupted:maybe", "<script>alert(1)</script>"):
        refused = client.get("/runs", params={"status": bad})
        assert refused.status_code == 400, refused.text
        assert "status" in refused.text
        assert "<script>alert(1)</script>" not in refused.text


def test_a_session_neither_lists_nor_counts_another_sessions_pauses(db: Path) -> None:
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    tokens = {
        alice: "11111111-1111-4111-8111-111111111111",
        bob: "22222222-2222-4222-8222-222222222222",
    }
    with dashboard(db, tokens=tokens) as client:
        client.headers["authorization"] = f"Bearer {alice}"
        errored = start(client, "flaky", "v1", title="routes-tenant")
        wait_for(client, errored, "interrupted")
        as_alice = client.get("/runs", params={"status": "interrupted:error"}).text
        assert _shown(as_alice) == {errored}
        assert _counts(as_alice)["interrupted:error"] == 1
        client.headers["authorization"] = f"Bearer {bob}"
        for status in ("", "interrupted", "interrupted:error", "interrupted:request"):
            as_bob = client.get("/runs", params={"status": status} if status else {})
            assert as_bob.status_code == 200
            assert errored not in as_bob.text
            assert set(_counts(as_bob.text).values()) == {0}
