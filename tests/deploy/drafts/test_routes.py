"""An unreachable node's diagnostic offers the ``draft_connect`` calls that put it on a
path: from every node that continues where it does (at most `MAX_ROUTES`), at the
revision the draft is stored as; none when the node continues nowhere."""

from __future__ import annotations

from typing import Any

from flowledger.deploy.drafts.diagnostics import MAX_ROUTES, diagnose
from flowledger.deploy.drafts.skeleton import skeleton

STEP = {"kind": "set", "assign": {"seen": True}, "next": "done"}


def document(nodes: dict[str, Any]) -> dict[str, Any]:
    return {**skeleton("routes"), "state": {"seen": {}}, "start": "a", "nodes": nodes}


def connects(diagnosis: Any, node: str) -> list[dict[str, Any]]:
    (found,) = [d for d in diagnosis.diagnostics if d["pointer"] == f"/nodes/{node}"]
    assert found["code"] == "unreachable_node"
    return [a for a in found["next_actions"] if a["tool"] == "draft_connect"]


def test_a_step_added_before_an_end_is_offered_the_connects_that_insert_it() -> None:
    nodes = {
        "a": dict(STEP),
        "new": dict(STEP),
        "done": {"kind": "end", "outcome": "done"},
    }
    diagnosis = diagnose(document(nodes), "d", 7)
    assert connects(diagnosis, "new") == [
        {
            "tool": "draft_connect",
            "arguments": {"draft": "d", "revision": 7, "from": "a", "to": "new"},
        }
    ]
    # the actions that only read follow the fix
    (found,) = diagnosis.diagnostics
    assert [a["tool"] for a in found["next_actions"]][1:] == ["explain", "draft_get"]


def test_no_connect_without_a_successor_or_a_revision_and_at_most_a_few() -> None:
    nodes = {
        "a": dict(STEP),
        "lost": {"kind": "end", "outcome": "lost"},
        "done": {"kind": "end", "outcome": "done"},
    }
    assert connects(diagnose(document(nodes), "d", 2), "lost") == []
    many = {f"s{i}": dict(STEP) for i in range(6)}
    nodes = {
        "a": {**STEP, "next": "s0"},
        **many,
        "new": dict(STEP),
        "done": {"kind": "end", "outcome": "done"},
    }
    diagnosis = diagnose(document(nodes), "d", 3)
    offered = connects(diagnosis, "new")
    assert len(offered) == MAX_ROUTES
    assert [a["arguments"]["from"] for a in offered] == ["s0", "s1", "s2"]
    assert connects(diagnose(document(nodes), "d"), "new") == []  # no revision known
