"""The Drafts pages (``/drafts``, ``/drafts/{name}``) through Starlette's TestClient on a
real SQLite file whose drafts a session made (as a model would, through `DraftService`)
before the dashboard opened it. The pages are read-only: there is nothing to POST."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.registry.access import SourceAccess
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .conftest import csrf, dashboard
from .registered import SCRIPT, clock, launcher, listing_probe, register, run

ALICE: Final = "11111111-1111-4111-8111-111111111111"
BOB: Final = "22222222-2222-4222-8222-222222222222"
TOKENS: Final = {"alice-token-0123456789": ALICE, "bob-token-0123456789ab": BOB}
TIME_TOOL: Final = {
    "name": "get_current_time",
    "description": "The time in a time zone.",
    "inputSchema": {
        "type": "object",
        "properties": {"timezone": {"type": "string"}},
        "required": ["timezone"],
    },
}


def as_(session: str) -> dict[str, str]:
    token = next(token for token, sid in TOKENS.items() if sid == session)
    return {"authorization": f"Bearer {token}"}


def make_drafts(db: Path, marker: Path) -> dict[str, Any]:
    """Alice's drafts: ``fresh`` (a valid skeleton), ``broken`` (from the clock's
    capability, then patched into an invalid state with markup everywhere a tenant can
    type) and ``launch`` (from a capability of a source that, if anything started it,
    would create ``marker``); Bob's ``mine``. Answers the drafts as the service answered
    them. Every probe is recorded: nothing is started."""
    register(
        db,
        [clock(), launcher(marker)],
        recorded={
            "clock": listing_probe(1, [TIME_TOOL]),
            "launcher": listing_probe(1, [TIME_TOOL]),
        },
    )

    async def make() -> dict[str, Any]:
        async with open_store(f"sqlite:///{db}") as store:

            def tenant(session: str) -> DraftService:
                built = WorkflowSession.build(store, session, Catalog())
                return DraftService(DeployService(built, access=SourceAccess.TENANT))

            alice, bob = tenant(ALICE), tenant(BOB)
            fresh = await alice.create("fresh")
            made = await alice.create("broken", {"source": "clock", "tool": "get_current_time"})
            start = made["document"]["start"]
            broken = await alice.patch(
                "broken",
                made["revision"],
                [
                    {"op": "replace", "path": f"/nodes/{start}/next", "value": "bad<i>"},
                    {
                        "op": "add",
                        "path": "/nodes/bad<i>",
                        "value": {"kind": "set", "label": SCRIPT, "next": "nowhere"},
                    },
                    {"op": "add", "path": "/description", "value": SCRIPT},
                    {
                        "op": "add",
                        "path": "/nodes/long",
                        "value": {"kind": "end", "label": "L" * 5000},
                    },
                ],
            )
            mine = await bob.create("mine")
            await alice.create("launch", {"source": "launcher", "tool": "get_current_time"})
            return {"fresh": fresh, "broken": broken, "mine": mine}

    return run(make())


def test_the_drafts_pages_show_a_sessions_drafts_escaped_and_read_only(tmp_path: Path) -> None:
    db = tmp_path / "drafts.db"
    marker = tmp_path / "launched"
    made = make_drafts(db, marker)
    broken = made["broken"]
    assert not broken["valid"] and broken["diagnostics"], broken
    with dashboard(db, tokens=TOKENS) as client:
        assert client.get("/drafts").status_code == 303  # sign in first
        assert client.get("/drafts/fresh").status_code == 303

        listing = client.get("/drafts", headers=as_(ALICE))
        assert listing.status_code == 200, listing.text
        assert '<a href="/drafts" aria-current="page">Drafts</a>' in listing.text
        rows = dict(re.findall(r'<tr data-draft="([a-z_]+)">(.*?)</tr>', listing.text, re.S))
        assert sorted(rows) == ["broken", "fresh", "launch"]  # never Bob's
        assert "mine" not in listing.text.split("<main>")[1]
        assert '"draft-valid">valid<' in rows["fresh"] and "skeleton" in rows["fresh"]
        issues = len(broken["diagnostics"])
        assert f'"draft-invalid">{issues} issue' in rows["broken"]
        assert "capability clock/get_current_time" in rows["broken"]
        assert f"<td>{broken['revision']}</td>" in rows["broken"]

        page = client.get("/drafts/broken", headers=as_(ALICE))
        assert page.status_code == 200, page.text
        text = page.text
        assert f"<h1>Draft broken, revision {broken['revision']}</h1>" in text
        assert 'id="draft-validity"><span class="draft-invalid">invalid' in text
        assert "clock</span> → source <a" in text and 'href="/sources/clock"' in text
        # markup typed into the document is text, in the picture and in the document
        assert SCRIPT not in text and "<i>" not in text
        assert "&lt;script&gt;alert(&#39;source&#39;)&lt;/script&gt;" in text
        assert 'data-vertex="bad&lt;i&gt;" data-state="failed"' in text  # diagnosed node
        start = broken["document"]["start"]
        assert f'data-source="{start}" data-target="bad&lt;i&gt;"' in text  # its edge
        assert 'data-target="nowhere"' not in text  # a reference to nothing is not drawn
        assert (
            "L" * 63 + "…</text>" in text
            and "L" * 65 not in text.split("<svg")[1].split("</svg>")[0]
        )
        shown = re.findall(r'<li class="diagnostic" data-code="([a-z_]+)">', text)
        assert shown == [d["code"] for d in broken["diagnostics"]]
        for diagnostic in broken["diagnostics"]:
            for action in diagnostic["next_actions"]:
                assert f'<span class="tool">{action["tool"]}</span>' in text
        code = broken["diagnostics"][0]["code"]
        assert f"explain</span> {{&#34;code&#34;: &#34;{code}&#34;}}</code>" in text
        assert "draft_get</span> {&#34;draft&#34;: &#34;broken&#34;}</code>" in text

        fresh = client.get("/drafts/fresh", headers=as_(ALICE)).text
        assert 'id="draft-validity"><span class="draft-valid">valid' in fresh
        assert 'id="no-diagnostics"' in fresh and made["fresh"]["digest"] in fresh
        assert 'data-vertex="done" data-state="not_reached" data-role="entry finish"' in fresh

        # another session's draft, an unknown one and a name that is no draft name: 404
        for path in ("/drafts/mine", "/drafts/nope", "/drafts/..%2Fmine", "/drafts/A%20B"):
            missing = client.get(path, headers=as_(ALICE))
            assert missing.status_code == 404, path
            assert "%2F" in path or "no draft" in missing.text  # "/" routes nowhere
        bobs = client.get("/drafts", headers=as_(BOB)).text
        assert "broken" not in bobs and 'data-draft="mine"' in bobs
        assert client.get("/drafts/broken", headers=as_(BOB)).status_code == 404

        # read-only pages: a POST (forged or with the right CSRF field) changes nothing
        token = csrf(client, "/login")
        for path in ("/drafts", "/drafts/broken"):
            for data in ({"csrf": token}, {}):
                refused = client.post(path, data=data, headers=as_(ALICE))
                assert refused.status_code == 405, path
        again = client.get("/drafts/broken", headers=as_(ALICE)).text
        assert f"revision {broken['revision']}</h1>" in again
        launch = client.get("/drafts/launch", headers=as_(ALICE))
        assert launch.status_code == 200 and 'href="/sources/launcher"' in launch.text
    # a read-only dashboard shows the same pages
    with dashboard(db, tokens=TOKENS, read_only=True) as reader:
        page = reader.get("/drafts/broken", headers=as_(ALICE))
        assert page.status_code == 200 and 'data-code="' in page.text
        assert reader.get("/drafts/mine", headers=as_(ALICE)).status_code == 404
    assert not marker.exists()  # no page started the source a draft is bound to


def test_a_draft_without_nodes_to_draw_says_so(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"

    async def make() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            built = WorkflowSession.build(store, ALICE, Catalog())
            drafts = DraftService(DeployService(built, access=SourceAccess.TENANT))
            made = await drafts.create("empty")
            await drafts.patch("empty", made["revision"], [{"op": "remove", "path": "/nodes"}])

    run(make())
    with dashboard(db, tokens=TOKENS) as client:
        page = client.get("/drafts/empty", headers=as_(ALICE))
        assert page.status_code == 200, page.text
        assert 'id="no-graph">The draft has no nodes to draw yet.<' in page.text
        assert '<svg class="graph"' not in page.text
        assert 'data-code="' in page.text  # what is missing is a diagnostic
