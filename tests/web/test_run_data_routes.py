"""The run's data page (`flowledger.web.run_data`) through HTTP: only the run's own
session reads it (another token's session gets 404 and none of the data; nobody signed
in is sent to sign in), it has no action to forge, a bad revision is named, a resume
from the CLI is recorded as the CLI's, and a run whose answers were never recorded says
so."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

from flowledger.storage import open_store
from flowledger.workflows.records.answers import answers_key
from flowledger.workflows.runtime.session import default_session_id

from ..deploy.servers import REPO
from .conftest import csrf, dashboard, start, wait_for
from .servers import APP

SECRET = "Revenue is 41 million, not public yet"
DOC = {"title": "Quarterly", "document": SECRET}
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
TOKENS = {
    ALICE: "11111111-1111-4111-8111-111111111111",
    BOB: "22222222-2222-4222-8222-222222222222",
}


def test_another_session_cannot_read_a_runs_data(db: Path) -> None:
    with dashboard(db, tokens=TOKENS) as client:
        token = csrf(client, "/login")
        assert client.post("/login", data={"csrf": token, "token": ALICE}).status_code == 303
        run = start(client, "document_review", "v1", **DOC)
        wait_for(client, run, "interrupted")
        mine = client.get(f"/runs/{run}/data")
        assert mine.status_code == 200 and SECRET in mine.text
        for revision in ("", "?revision=0"):
            as_bob = client.get(
                f"/runs/{run}/data{revision}", headers={"authorization": f"Bearer {BOB}"}
            )
            assert as_bob.status_code == 404, as_bob.text
            assert SECRET not in as_bob.text
        client.post("/logout", data={"csrf": csrf(client)})
        anonymous = client.get(f"/runs/{run}/data")
        assert anonymous.status_code == 303 and anonymous.headers["location"] == "/login"


def test_the_page_has_no_action_and_names_a_bad_revision(db: Path) -> None:
    with dashboard(db) as client:
        run = start(client, "document_review", "v1", **DOC)
        wait_for(client, run, "interrupted")
        forged = client.post(f"/runs/{run}/data", data={"csrf": csrf(client)})
        assert forged.status_code == 405
        bad = client.get(f"/runs/{run}/data?revision=x")
        assert bad.status_code == 400 and "revision must be" in bad.text
        beyond = client.get(f"/runs/{run}/data?revision=999")
        assert beyond.status_code == 404 and "not 999" in beyond.text
        unknown = client.get("/runs/33333333-3333-4333-8333-333333333333/data")
        assert unknown.status_code == 404


def _cli(db: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "flowledger", *args, "--db", f"sqlite:///{db}", "--app", APP],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,  # only catches a hang
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_cli_resume_is_recorded_and_a_run_without_answers_says_not_recorded(db: Path) -> None:
    started = _cli(db, "start", "document_review", "v1", "--input", json.dumps(DOC), "--json")
    run = str(started["run_id"])
    assert started["run_status"] == "interrupted", started
    with dashboard(db) as client:
        before = client.get(f"/runs/{run}/data")
        assert "Not recorded" in before.text
    payload = {"approved": False, "note": "<i>not yet</i>"}
    _cli(db, "resume", run, "--payload", json.dumps(payload), "--json")
    with dashboard(db) as client:
        page = client.get(f"/runs/{run}/data").text
        assert 'class="answer-transport">the CLI<' in page
        assert "&lt;i&gt;not yet&lt;/i&gt;" in page and "<i>not yet" not in page

    async def forget() -> None:  # as a run resumed before answers were recorded
        async with open_store(f"sqlite:///{db}") as store:
            session = await default_session_id(store)
            await store.kv.delete(answers_key(session, run))

    asyncio.run(forget())
    with dashboard(db) as client:
        page = client.get(f"/runs/{run}/data").text
        assert "Not recorded" in page and "answer-transport" not in page


def test_every_error_of_the_run_is_listed_escaped_and_only_to_its_owner(db: Path) -> None:
    text = "<script>window.owned = 1</script>"
    with dashboard(db, tokens=TOKENS) as client:
        token = csrf(client, "/login")
        assert client.post("/login", data={"csrf": token, "token": ALICE}).status_code == 303
        run = start(client, "shout", "v1", text=text)  # fails once, quoting the text
        wait_for(client, run, "interrupted")
        errored = client.get(f"/runs/{run}/data").text
        [revision] = re.findall(r'<tr data-revision="(\d+)" data-vertex="shout"', errored)
        retried = client.post(f"/runs/{run}/retry", data={"csrf": csrf(client, f"/runs/{run}")})
        assert retried.status_code == 303, retried.text
        wait_for(client, run, "completed")

        # at the latest revision the error is gone from the state, not from the run's list
        latest = client.get(f"/runs/{run}/data").text
        assert 'id="errors"' not in latest  # none at this revision
        listed = latest[latest.index('id="run-errors"') :]
        listed = listed[: listed.index("</section>")]
        assert f'href="/runs/{run}/data?revision={revision}"' in listed
        assert '<td class="error-type">ValueError</td>' in listed
        assert "cannot shout &lt;script&gt;window.owned = 1&lt;/script&gt;" in listed
        assert text not in latest  # escaped everywhere on the page
        assert listed.count("<tr data-revision=") == 1  # listed once, where it appeared

        as_bob = client.get(f"/runs/{run}/data", headers={"authorization": f"Bearer {BOB}"})
        assert as_bob.status_code == 404 and "cannot shout" not in as_bob.text
