"""Property: random rounds of JSON Patches and focused edits, each round made by up to
three concurrent writers at the current or a stale revision, never corrupt a draft, on
the memory and SQLite backends:

* of the writers of one revision at most one wins; revisions are contiguous (every win
  is the next revision, once);
* the stored draft always decodes, and equals the previous document with the winner's
  patch applied (so a losing, stale or failing edit changed nothing);
* a stored state is valid exactly when it has no diagnostics, and its diagnostics (and
  recorded capabilities) are those of checking its document now: as an artifact, and
  against the catalog (a registered source ``calc`` whose recorded probe lists one tool,
  ``add``: tool steps come from draft_add_tool or from patches, with literal arguments
  of either type, expressions, and result paths declared or not).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.errors import DraftConflictError, DraftError
from flowledger.deploy.drafts.patch import apply_patch
from flowledger.deploy.drafts.record import decode_draft, timestamp
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.drafts.store import DraftStore
from flowledger.deploy.registry.store import Probe, SourceRegistry
from flowledger.deploy.sources.tool_info import ToolInfo
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

SESSION = str(uuid.UUID(int=11, version=4))
NAME = "prop_draft"
IDS = ["a", "b", "c", "done", "t"]
ADD = {
    "name": "add",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {"sum": {"type": "integer"}},
        "required": ["sum"],
        "additionalProperties": False,
    },
}
node_ids = st.sampled_from(IDS)
arguments = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([1, "one", "${ state.x }", "${ input.a }"]),
    max_size=3,
)
node_values = st.one_of(
    st.builds(
        lambda nxt, given, read: {
            "kind": "tool",
            "dependency": "calc",
            "tool": "add",
            "arguments": given,
            "assign": {"x": read},
            "next": nxt,
        },
        node_ids,
        arguments,
        st.sampled_from(["${ result.structured.sum }", "${ result.structured.nope }"]),
    ),
    st.builds(
        lambda nxt, text: {"kind": "set", "assign": {"x": text}, "next": nxt},
        node_ids,
        st.text(max_size=4),
    ),
    st.just({"kind": "end", "outcome": "ok"}),
    st.just({"kind": "switch", "cases": [], "default": "done"}),
)
operations = st.one_of(
    st.builds(lambda i, v: {"op": "add", "path": f"/nodes/{i}", "value": v}, node_ids, node_values),
    st.builds(lambda i: {"op": "remove", "path": f"/nodes/{i}"}, node_ids),
    st.builds(lambda i: {"op": "replace", "path": "/start", "value": i}, node_ids),
    st.builds(lambda t: {"op": "add", "path": "/description", "value": t}, st.text(max_size=8)),
    st.just({"op": "add", "path": "/state", "value": {"x": {}}}),
    st.just({"op": "add", "path": "/state", "value": {"x": {"reduce": "sum"}}}),
    st.just({"op": "add", "path": "/dependencies", "value": {"calc": {"tools": ["add"]}}}),
    st.builds(
        lambda i, name, v: {"op": "add", "path": f"/nodes/{i}/arguments/{name}", "value": v},
        node_ids,
        st.sampled_from(["a", "b"]),
        st.sampled_from([2, "two", "${ state.x }"]),
    ),
    st.builds(lambda i: {"op": "test", "path": "/start", "value": i}, node_ids),
    st.builds(
        lambda i, j: {"op": "move", "from": f"/nodes/{i}", "path": f"/nodes/{j}"},
        node_ids,
        node_ids,
    ),
    st.builds(
        lambda i, j: {"op": "copy", "from": f"/nodes/{i}", "path": f"/nodes/{j}"},
        node_ids,
        node_ids,
    ),
    st.just({"op": "nope", "path": "/x"}),
)
edits = st.one_of(
    st.tuples(st.just("patch"), st.lists(operations, min_size=1, max_size=3)),
    st.tuples(st.just("connect"), st.tuples(node_ids, node_ids)),
    st.tuples(st.just("output"), st.dictionaries(st.sampled_from(["x", "y"]), st.text(max_size=3))),
    st.tuples(st.just("add_tool"), st.tuples(node_ids, st.sampled_from([None, *IDS]))),
)
writers = st.lists(st.tuples(edits, st.sampled_from([0, 0, 1])), min_size=1, max_size=3)
rounds = st.lists(writers, min_size=1, max_size=6)
# a tool step from the catalog, given a wrong literal, then reading an undeclared result
# path, each round against a stale writer too
CONTRACT_PLAN = [
    [(("add_tool", ("t", None)), 0), (("add_tool", ("t", None)), 1)],
    [
        (("patch", [{"op": "add", "path": "/state", "value": {"x": {}}}]), 0),
        (("patch", [{"op": "add", "path": "/description", "value": "stale"}]), 1),
    ],
    [(("patch", [{"op": "add", "path": "/nodes/t/arguments/a", "value": "two"}]), 0)],
    [
        (
            (
                "patch",
                [
                    {
                        "op": "add",
                        "path": "/nodes/t/assign",
                        "value": {"x": "${ result.structured.nope }"},
                    }
                ],
            ),
            0,
        )
    ],
]


class YieldingKV:
    """The store's KV, giving way to the other writers after every read: concurrent
    edits of one revision all read it before any writes, so the compare-and-swap (not
    only the revision check) decides between them."""

    def __init__(self, kv: Any) -> None:
        self._kv = kv

    async def get(self, key: str) -> Any:
        entry = await self._kv.get(key)
        await asyncio.sleep(0)
        return entry

    async def put(self, key: str, value: bytes, *, expected: int, fence: Any = None) -> int:
        result: int = await self._kv.put(key, value, expected=expected, fence=fence)
        return result

    async def delete(self, key: str, *, fence: Any = None) -> None:
        await self._kv.delete(key, fence=fence)

    async def keys(self, prefix: str = "") -> list[str]:
        found: list[str] = await self._kv.keys(prefix)
        return found


async def _write(drafts: DraftService, revision: int, edit: tuple[str, Any]) -> Any:
    kind, argument = edit
    if kind == "patch":
        return await drafts.patch(NAME, revision, argument)
    if kind == "connect":
        return await drafts.connect(NAME, revision, argument[0], argument[1])
    if kind == "add_tool":
        node, after = argument
        return await drafts.add_tool(NAME, revision, "calc", "add", node=node, after=after)
    return await drafts.set_output(NAME, revision, argument)


async def _check_stored(store: Any, drafts: DraftService) -> dict[str, Any]:
    entry = await store.kv.get(f"sessions/{SESSION}/deploy/drafts/{NAME}")
    decoded = decode_draft("key", entry.value, NAME)  # every stored state decodes
    assert decoded is not None
    shown = await drafts.get(NAME)
    assert shown == decoded.to_json()
    assert shown["valid"] == (shown["diagnostics"] == [])
    diagnosis = await drafts.check(NAME, shown["document"], shown["bindings"], shown["revision"])
    assert shown["valid"] == diagnosis.valid
    assert shown["diagnostics"] == list(diagnosis.diagnostics)
    assert shown["capabilities"] == list(diagnosis.capabilities)
    return shown


async def _registered_calc(store: Any) -> None:
    """The operator registered ``calc``; its recorded probe lists ``add``."""
    registry = SourceRegistry.over(store)
    await registry.add(
        {"format": "flowledger.source/v1", "name": "calc", "stdio": {"command": sys.executable}}
    )
    probe = Probe(1, timestamp(), True, None, {"name": "calc"}, (ToolInfo.from_entry(ADD),))
    await registry.record_probe("calc", probe)


def _yielding(drafts: DraftService, store: Any) -> DraftStore:
    return DraftStore(YieldingKV(store.kv), drafts.check)


async def _run(url: str, plan: list[list[tuple[tuple[str, Any], int]]], seen: set[str]) -> None:
    async with open_store(url) as store:
        await _registered_calc(store)
        drafts = DraftService(DeployService(WorkflowSession.build(store, SESSION, Catalog())))
        drafts.store = _yielding(drafts, store)
        await drafts.create(NAME)
        current = await _check_stored(store, drafts)
        wins = 0
        for round_ in plan:
            revision = current["revision"]
            chosen = [max(1, revision - stale) for _, stale in round_]
            results = await asyncio.gather(
                *(_write(drafts, r, edit) for (edit, _), r in zip(round_, chosen, strict=True)),
                return_exceptions=True,
            )
            won = [(i, result) for i, result in enumerate(results) if isinstance(result, dict)]
            for index, result in enumerate(results):
                if isinstance(result, BaseException) and not isinstance(result, DraftError):
                    raise result
                if chosen[index] != revision:  # stale: refused, whatever the edit
                    assert isinstance(result, DraftConflictError)
            assert len(won) <= 1
            stored = await _check_stored(store, drafts)
            seen.update(item["code"] for item in stored["diagnostics"])
            if won:
                index, answer = won[0]
                wins += 1
                assert answer["revision"] == stored["revision"] == revision + 1
                kind, argument = round_[index][0]
                applied = argument if kind == "patch" else answer["applied"]
                assert stored["document"] == apply_patch(current["document"], applied)
                shown = {k: v for k, v in answer.items() if k not in ("applied", "unmapped")}
                assert shown == stored
            else:
                assert stored == current  # nothing applied, byte for byte the same state
            current = stored
        assert current["revision"] == 1 + wins


def test_two_writers_of_one_revision_one_wins_by_compare_and_swap() -> None:
    async def run() -> None:
        async with open_store("memory://") as store:
            session = WorkflowSession.build(store, SESSION, Catalog())
            drafts = DraftService(DeployService(session))
            drafts.store = _yielding(drafts, store)
            await drafts.create(NAME)
            results = await asyncio.gather(
                drafts.patch(NAME, 1, [{"op": "add", "path": "/description", "value": "one"}]),
                drafts.patch(NAME, 1, [{"op": "add", "path": "/description", "value": "two"}]),
                return_exceptions=True,
            )
            won = [r for r in results if isinstance(r, dict)]
            lost = [r for r in results if isinstance(r, DraftConflictError)]
            assert len(won) == 1 and len(lost) == 1
            assert lost[0].current is None  # both read revision 1: the CAS refused one
            stored = await drafts.get(NAME)
            assert stored["revision"] == 2
            assert stored["document"]["description"] == won[0]["document"]["description"]

    asyncio.run(run())


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_concurrent_edits_never_corrupt_a_draft(backend: str) -> None:
    @settings(
        max_examples=40 if backend == "memory" else 15,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(plan=rounds)
    @example(plan=CONTRACT_PLAN)
    def check(plan: list[list[tuple[tuple[str, Any], int]]]) -> None:
        with tempfile.TemporaryDirectory() as directory:
            url = "memory://" if backend == "memory" else f"sqlite:///{Path(directory) / 'd.db'}"
            asyncio.run(_run(url, plan, seen))

    seen: set[str] = set()
    check()
    # the catalog's checks were among what the stored states carried
    assert {"argument_missing", "argument_invalid", "result_path_unknown"} <= seen, seen
