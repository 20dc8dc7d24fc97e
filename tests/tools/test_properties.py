"""Random tool calls (hypothesis): whatever the arguments, `WorkflowTools.call` either
returns a JSON result or raises `ToolError`, and a refused call writes no run record
(workflows-spec §7.1 "each failure raises", DESIGN "bad input ... nothing is written")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger.storage import open_store
from flowledger.tools import TOOL_NAMES, ToolError, WorkflowTools
from flowledger.workflows.records.run import RunStatus
from tests.workflows.conftest import build_session

from .conftest import SENTINEL, IdSource, noter_definition

FIELDS = [
    "definition_name",
    "definition_version",
    "input",
    "parent_run_id",
    "run_id",
    "after",
    "limit",
    "resume",
    "reason",
    "after_revision",
    "after_event_id",
    "unexpected",
]
MISSING = "99999999-9999-4999-8999-999999999999"
ZERO = "00000000-0000-0000-0000-000000000000"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["counter", "asker", "noter", "v1", "v2", "", ZERO, MISSING, SENTINEL]),
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
documents = st.one_of(
    st.fixed_dictionaries({"count": st.integers(-2, 3)}),
    st.fixed_dictionaries({"count": st.integers(0, 3), "note": st.just(SENTINEL)}),
    st.fixed_dictionaries({"increment": st.integers(-1, 3)}),
    st.fixed_dictionaries({"memo": st.just(SENTINEL)}),
    json_like,
)


def arguments(run_ids: list[str]) -> st.SearchStrategy[Any]:
    """Anything at all: mappings of known and unknown fields with random values, JSON text
    (also with a trailing value), junk text and bytes, None, a list."""
    values = st.one_of(json_like, documents, st.sampled_from(run_ids))
    mapping = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4), values, max_size=5)
    text = mapping.map(lambda m: json.dumps(m, allow_nan=True))
    return st.one_of(
        mapping,
        text,
        text.map(lambda t: t + " {}"),
        st.text(max_size=20),
        st.binary(max_size=20),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )


def plausible(name: str, run_ids: list[str]) -> st.SearchStrategy[Any]:
    """Arguments shaped like the tool's own, so calls also get past decoding and succeed
    or fail deep inside (unknown runs and definitions, bad cursors, limits, payloads)."""
    ids = st.sampled_from([*run_ids, "", "x", ZERO])
    limits = st.integers(-1, 101)
    optional: dict[str, st.SearchStrategy[Any]] = {"unexpected": json_like}
    if name == "workflow_run_start":
        required: dict[str, st.SearchStrategy[Any]] = {
            "definition_name": st.sampled_from(["counter", "asker", "noter", "nope"]),
            "definition_version": st.sampled_from(["v1", "v2"]),
            "input": documents,
        }
        optional["parent_run_id"] = ids
    elif name == "workflow_run_list":
        required = {}
        optional.update(after=ids, limit=limits)
    elif name == "workflow_definition_list":
        required = {}
    else:
        required = {"run_id": ids}
        if name == "workflow_run_resume":
            required["resume"] = documents
        elif name == "workflow_run_cancel":
            optional["reason"] = st.text(max_size=3) | st.just("x" * 513)
        elif name == "workflow_run_history":
            optional.update(
                after_revision=st.integers(-1, 6),
                after_event_id=st.sampled_from(["", "x", ZERO, MISSING]),
                limit=limits,
            )
    return st.fixed_dictionaries(required, optional=optional)


def calls(run_ids: list[str]) -> st.SearchStrategy[tuple[str, Any]]:
    names = st.sampled_from([*TOOL_NAMES, "nope"])
    anything = st.tuples(names, arguments(run_ids))
    shaped = st.sampled_from(TOOL_NAMES).flatmap(
        lambda name: st.tuples(st.just(name), plausible(name, run_ids))
    )
    return st.one_of(anything, shaped)


def quotes_sentinel(args: Any) -> bool:
    """Whether an error may rightly quote the sentinel: it is one of the caller's own
    top-level names (a definition name or version, or a field name), not input data."""
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args)
        except ValueError:
            return SENTINEL in repr(args)
    if not isinstance(args, dict):
        return False
    names = [value for key, value in args.items() if key not in ("input", "resume")]
    return SENTINEL in repr(names) or any(SENTINEL in str(key) for key in args)


async def snapshot(kv: Any) -> dict[str, int]:
    keys = await kv.keys("sessions/")
    return {key: (await kv.get(key)).revision for key in keys if "/workflows/runs/" in key}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_random_calls_raise_only_tool_errors_and_write_nothing(kind: str, tmp_path: Path) -> None:
    """§7.1: random argument mappings (and text, bytes, junk) never make call() raise
    anything but ToolError; a call that fails leaves every run record as it was; every
    success is JSON without the input sentinel."""
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path}/t.db"
    with asyncio.Runner() as runner:
        opened = open_store(url)
        store = runner.run(opened.__aenter__())
        session = build_session(store)
        session.catalog.register(noter_definition(session.checkpoints))
        supervisor = session.supervisor()
        runner.run(supervisor.activate())
        tools = WorkflowTools(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            inputs=session.inputs,
            supervisor=supervisor,
            new_id=IdSource(100),
        )

        async def seed() -> list[str]:
            waiting = await tools.call(
                "workflow_run_start",
                {"definition_name": "asker", "definition_version": "v1", "input": {"count": 1}},
            )
            done = await tools.call(
                "workflow_run_start",
                {"definition_name": "counter", "definition_version": "v1", "input": {"count": 1}},
            )
            await supervisor.wait_idle()
            status = (await session.registry.get(session.session_id, waiting["run_id"])).status
            assert status is RunStatus.INTERRUPTED
            return [waiting["run_id"], done["run_id"], MISSING, waiting["run_id"].upper()]

        run_ids = runner.run(seed())
        outcomes = {"ok": 0, "refused": 0}

        async def one(name: str, args: Any) -> None:
            before = await snapshot(store.kv)
            try:
                result = await tools.call(name, args)
            except ToolError as exc:
                assert str(exc).startswith("workflow tools: ")
                assert session.session_id not in str(exc)
                if not quotes_sentinel(args):
                    assert SENTINEL not in str(exc)
                assert await snapshot(store.kv) == before
                outcomes["refused"] += 1
                return
            text = json.dumps(result, allow_nan=False)
            assert SENTINEL not in text
            assert session.session_id not in text
            outcomes["ok"] += 1
            assert await supervisor.wait_idle() is None

        @settings(
            max_examples=300,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        @given(calls(run_ids))
        def check(call: tuple[str, Any]) -> None:
            runner.run(one(*call))

        try:
            check()
        finally:
            runner.run(supervisor.shutdown())
            runner.run(opened.__aexit__(None, None, None))
        assert outcomes["ok"] > 0 and outcomes["refused"] > 0
