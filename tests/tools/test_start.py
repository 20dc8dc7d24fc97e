"""workflow_run_start (workflows-spec §7.3, §12.76, §12.77, §12.80, §12.81)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowledger.tools import PrepareRunIntegrityError, ToolError
from flowledger.workflows.errors import (
    AdoptionError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    UnknownDefinitionError,
)
from flowledger.workflows.records.run import (
    ArtifactReference,
    ForkedFrom,
    InputReference,
    Run,
    RunStatus,
    ScheduledBy,
)
from flowledger.workflows.runtime.supervisor import StartTicket

from .conftest import CLOCK, CLOCK_TEXT, FORBIDDEN, SENTINEL, STATE_SENTINEL, Env, refused

RUN_KEYS = {
    "run_id",
    "definition_name",
    "definition_version",
    "run_status",
    "status_summary",
    "checkpoint_revision",
    "activity_cursor",
    "parent_run_id",
    "artifacts",
    "created_at",
    "updated_at",
    "resume_readiness",  # workflow_run_get and workflow_run_resume only
}
ID2 = "00000000-0000-0000-0000-000000000002"
ID3 = "00000000-0000-0000-0000-000000000003"
ID4 = "00000000-0000-0000-0000-000000000004"
OTHER = "99999999-9999-4999-8999-999999999999"


def start_args(name: str = "counter", document: Any = None, **extra: Any) -> dict[str, Any]:
    return {
        "definition_name": name,
        "definition_version": "v1",
        "input": {"count": 0} if document is None else document,
        **extra,
    }


async def assert_nothing_written(env: Env, blobs_before: list[str]) -> None:
    assert env.registry.created == []
    assert await env.registry_snapshot() == {}
    assert await env.blob_keys() == blobs_before
    assert [call for call in env.recorder.calls if call[0] == "start"] == []


async def test_start_persists_canonical_input_and_returns_after_seed(env: Env) -> None:
    """§12.77: the stored input is canonical ({"z":2,"a":1} -> {"a":1,"z":2}); start returns
    after the seed with run_id = the first minted ID and status running, without waiting
    for completion: the only vertex is held by a closed gate, so a start that waited would
    never return (the deadline only catches that hang)."""
    env.session.gates.close("add")
    async with asyncio.timeout(120):
        result = await env.call("workflow_run_start", start_args("pair", {"z": 2, "a": 1}))
    assert result["run_id"] == ID2
    assert result["run_status"] == "running"
    assert result["created_at"] == CLOCK_TEXT
    assert result["checkpoint_revision"] == 0
    record = await env.record(ID2)
    stored = await env.session.store.blobs.get(record.input.key)
    assert stored == b'{"a":1,"z":2}'
    assert record.input.digest == hashlib.sha256(stored).hexdigest()
    assert record.input.size == len(stored)
    assert record.status is not RunStatus.COMPLETED
    env.session.gates.open("add")
    await env.settle()
    assert (await env.record(ID2)).status is RunStatus.COMPLETED


async def test_pending_record_fields(env: Env) -> None:
    """§7.3 steps 7-8: IDs minted in order (run, graph run, execution); the pending
    record's session, namespace, locator, times and counters; step 11 starts it."""
    await env.start()
    assert env.ids.minted[:3] == [ID2, ID3, ID4]
    [created] = env.registry.created
    assert created.session_id == env.session.session_id
    assert created.id == ID2
    assert created.graph_run_id == ID3
    assert created.tool_execution_id == ID4
    assert created.definition_name == "counter"
    assert created.definition_version == "v1"
    assert created.status is RunStatus.PENDING
    assert created.parent_run_id is None
    assert created.artifact_session_id == env.session.session_id
    assert created.artifact_run_id == ID2
    assert created.ledger_locator == f"flow/runs/{ID3}"
    assert created.created_at == created.updated_at == CLOCK
    assert created.checkpoint_revision == created.activity_cursor == 0
    assert created.revision == 0
    assert env.recorder.calls == [("start", ID2)]
    await env.settle()


async def test_run_result_omits_private_fields(env: Env) -> None:
    """§12.76 / §7.2: the run result omits the input reference, Flow state, session,
    graph run, execution, locator and cancel flag: none of the private markers appear,
    and the keys are exactly the allowed ones."""
    started = await env.start("noter", {"count": 1, "note": SENTINEL})
    await env.settle()
    got = await env.call("workflow_run_get", {"run_id": started["run_id"]})
    listed = await env.call("workflow_run_list", {})
    # What the run waits for is addressed to whoever resumes it: workflow_run_get shows
    # the interrupt's info (here it carries the state sentinel) and nothing else private.
    pending = got.pop("pending")
    assert pending["info"] == {"question": STATE_SENTINEL}
    assert pending["kind"] == "request" and pending["vertex_label"] == "hold the note"
    for result in (started, got, *listed["runs"]):
        assert set(result) <= RUN_KEYS
        text = json.dumps(result)
        for marker in FORBIDDEN:
            assert marker not in text, marker
    assert "resume_readiness" not in started and "resume_readiness" not in listed["runs"][0]
    assert got["resume_readiness"] == {"status": "ready"}
    assert got["run_status"] == "interrupted"
    assert got["status_summary"] == "count=1"
    record = await env.record(started["run_id"])
    for private in (record.input.digest, record.graph_run_id, record.tool_execution_id):
        assert private not in json.dumps([started, got, listed])


async def test_unknown_definition(env: Env) -> None:
    """§7.3 step 2: an unknown name or version is refused before anything is written."""
    before = await env.blob_keys()
    for name, version in (("nothing", "v1"), ("counter", "v2")):
        arguments = start_args()
        arguments.update(definition_name=name, definition_version=version)
        error = await refused(env.tools.call("workflow_run_start", arguments))
        assert str(error) == (
            f"workflow tools: start run: unknown workflow definition {name!r} version {version!r}"
        )
        assert isinstance(error.cause, UnknownDefinitionError)
        assert error.__cause__ is error.cause
    await assert_nothing_written(env, before)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"count": SENTINEL}, "invalid input: $.count: expected an integer, got a string"),
        ({"count": -1}, "invalid input: $.count: -1 is less than the minimum 0"),
        ({}, "invalid input: $.count: required property missing"),
        (
            {"count": 1, "extra": SENTINEL},
            "invalid input: $.extra: additional property not allowed",
        ),
        (
            {"count": -1, "extra": 1, "other": [SENTINEL]},
            "invalid input: $.count: -1 is less than the minimum 0; "
            "$.extra: additional property not allowed; $.other: additional property not allowed",
        ),
        ({"count": 10**30 + 1}, "invalid input: a number has no exact IEEE 754 double form"),
    ],
)
async def test_invalid_input(env: Env, document: dict[str, Any], message: str) -> None:
    """§7.3 steps 3-4: canonicalisation and the definition's validation refuse the input
    before it is stored; the message names every violation with its path and reason but
    never quotes the input's strings."""
    before = await env.blob_keys()
    error = await refused(env.tools.call("workflow_run_start", start_args(document=document)))
    assert str(error) == f"workflow tools: {message}"
    assert SENTINEL not in str(error)
    assert isinstance(error.cause, InvalidInputError)
    assert error.cause.field == "input"
    await assert_nothing_written(env, before)


async def test_inexact_decimal_text_input(env: Env) -> None:
    """§7.3 step 3 / §4.1: a number in the argument text with no exact double form is
    refused (never rounded silently)."""
    text = (
        '{"definition_name":"counter","definition_version":"v1",'
        '"input":{"count":0.10000000000000000001}}'
    )
    error = await refused(env.tools.call("workflow_run_start", text))
    assert str(error) == "workflow tools: invalid input: a number has no exact IEEE 754 double form"


async def test_equal_inputs_share_one_blob(env: Env) -> None:
    """§7.3 step 6: canonical input is digest-addressed: the same document in another key
    order and number spelling is stored once."""
    first = await env.start("pair", {"a": 1, "z": 2})
    second = await env.call(
        "workflow_run_start",
        '{"definition_name":"pair","definition_version":"v1","input":{"z":2.0,"a":1}}',
    )
    await env.settle()
    a = await env.record(first["run_id"])
    b = await env.record(second["run_id"])
    assert a.input == b.input
    assert len(await env.blob_keys()) == 1


async def test_parent_run(env: Env) -> None:
    """§7.3 step 5: a parent must parse and exist in this session; the result shows it."""
    parent = await env.start()
    await env.settle()
    child = await env.call("workflow_run_start", start_args(parent_run_id=parent["run_id"]))
    assert child["parent_run_id"] == parent["run_id"]
    empty = await env.call("workflow_run_start", start_args(parent_run_id=""))
    assert "parent_run_id" not in empty
    await env.settle()
    created = len(env.registry.created)
    error = await refused(env.tools.call("workflow_run_start", start_args(parent_run_id="zz")))
    assert str(error) == "workflow tools: parent_run_id must be a nonzero UUID"
    error = await refused(env.tools.call("workflow_run_start", start_args(parent_run_id=OTHER)))
    assert str(error) == f"workflow tools: start run: parent run {OTHER} not found"
    assert isinstance(error.cause, NotFoundError)
    assert env.session.session_id not in str(error)
    assert len(env.registry.created) == created


@pytest.mark.parametrize(
    ("failing", "message"),
    [(0, "mint workflow run ID"), (1, "mint graph run ID"), (2, "mint execution ID")],
)
@pytest.mark.parametrize("how", ["raise", "zero", "garbage"])
async def test_mint_errors(env: Env, failing: int, message: str, how: str) -> None:
    """§7.3 step 7: an ID source error or a zero ID names what was being minted; no
    record is created."""
    calls = iter(range(10))

    def new_id() -> str:
        index = next(calls)
        if index == failing:
            if how == "raise":
                raise OSError("no entropy")
            return "00000000-0000-0000-0000-000000000000" if how == "zero" else "x"
        return f"00000000-0000-0000-0000-00000000001{index}"

    tools = env.bundle(new_id=new_id)
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert str(error).startswith(f"workflow tools: {message}: ")
    if how == "raise":
        assert isinstance(error.cause, OSError)
    assert env.registry.created == []
    assert await env.registry_snapshot() == {}


async def test_duplicate_run_id_conflicts(env: Env) -> None:
    """§7.3 step 10: a create conflict (the minted run ID exists) is raised."""
    first = await env.start()
    await env.settle()
    ids = iter([first["run_id"], OTHER, OTHER])
    tools = env.bundle(new_id=lambda: next(ids))
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert str(error) == (
        f"workflow tools: start run: conflict for run {first['run_id']}: run already exists"
    )
    assert isinstance(error.cause, ConflictError)
    assert env.session.session_id not in str(error)


PROTECTED_CHANGES: list[tuple[str, Any]] = [
    ("session_id", lambda r: dataclasses.replace(r, session_id=OTHER)),
    ("tool_execution_id", lambda r: dataclasses.replace(r, tool_execution_id=OTHER)),
    ("definition_name", lambda r: dataclasses.replace(r, definition_name="asker")),
    ("definition_version", lambda r: dataclasses.replace(r, definition_version="v2")),
    ("id", lambda r: dataclasses.replace(r, id=OTHER)),
    ("graph_run_id", lambda r: dataclasses.replace(r, graph_run_id=OTHER)),
    ("parent_run_id", lambda r: dataclasses.replace(r, parent_run_id=OTHER)),
    (
        "input",
        lambda r: dataclasses.replace(
            r, input=InputReference(r.input.digest, r.input.key, r.input.size + 1)
        ),
    ),
    ("status", lambda r: dataclasses.replace(r, status=RunStatus.RUNNING)),
    ("status_summary", lambda r: dataclasses.replace(r, status_summary="prepared")),
    ("cancel_requested", lambda r: dataclasses.replace(r, cancel_requested=True)),
    ("checkpoint_revision", lambda r: dataclasses.replace(r, checkpoint_revision=1)),
    ("activity_cursor", lambda r: dataclasses.replace(r, activity_cursor=1)),
    ("ledger_locator", lambda r: dataclasses.replace(r, ledger_locator="flow/runs/other")),
    (
        "artifacts",
        lambda r: dataclasses.replace(r, artifacts=(ArtifactReference("a", "k", "0" * 64, 1),)),
    ),
    ("created_at", lambda r: dataclasses.replace(r, created_at=r.created_at - timedelta(1))),
    ("updated_at", lambda r: dataclasses.replace(r, updated_at=r.updated_at + timedelta(1))),
    ("revision", lambda r: dataclasses.replace(r, revision=1)),
    (
        "forked_from",
        lambda r: dataclasses.replace(r, forked_from=ForkedFrom(OTHER, 0, "sha256:" + "0" * 64)),
    ),
    (
        "scheduled_by",
        lambda r: dataclasses.replace(
            r, scheduled_by=ScheduledBy(OTHER, datetime(2026, 1, 1, tzinfo=UTC))
        ),
    ),
    (
        "trace_parent",
        lambda r: dataclasses.replace(
            r, trace_parent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        ),
    ),
]


def test_protected_list_is_complete() -> None:
    """§12.80: the 18 protected fields (and ``forked_from``, ``scheduled_by`` and
    ``trace_parent``, flowledger additions) plus the 5 namespace fields are all of Run's."""
    names = {field.name for field in dataclasses.fields(Run)}
    namespace = {
        "artifact_session_id",
        "artifact_run_id",
        "artifact_input_kind",
        "artifact_input_session_id",
        "artifact_input_run_id",
    }
    assert len(PROTECTED_CHANGES) == 21
    assert {name for name, _ in PROTECTED_CHANGES} | namespace == names


@pytest.mark.parametrize(
    ("field", "change"), PROTECTED_CHANGES, ids=[f for f, _ in PROTECTED_CHANGES]
)
async def test_prepare_run_cannot_change_protected_fields(
    env: Env, field: str, change: Any
) -> None:
    """§12.80: prepare_run changing a protected field fails with PrepareRunIntegrityError
    naming it, and the registry's create is never called."""
    seen: list[Run] = []

    def hook(run: Run) -> Run:
        seen.append(run)
        return change(run)  # type: ignore[no-any-return]

    tools = env.bundle(prepare_run=hook)
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert isinstance(error, PrepareRunIntegrityError)
    assert error.field == field
    assert str(error) == f"workflow tools: prepare_run changed protected run field {field!r}"
    assert len(seen) == 1
    assert env.registry.created == []
    assert await env.registry_snapshot() == {}
    assert env.recorder.calls == []


async def test_prepare_run_reports_first_changed_field(env: Env) -> None:
    """§7.3 step 9: with several changes, the first in the spec's order is named; a hook
    that does not return a Run is a run_metadata change."""

    def many(run: Run) -> Run:
        return dataclasses.replace(run, revision=3, status_summary="x", graph_run_id=OTHER)

    error = await refused(env.bundle(prepare_run=many).call("workflow_run_start", start_args()))
    assert isinstance(error, PrepareRunIntegrityError)
    assert error.field == "graph_run_id"
    error = await refused(
        env.bundle(prepare_run=lambda run: {"id": run.id}).call("workflow_run_start", start_args())
    )
    assert isinstance(error, PrepareRunIntegrityError)
    assert error.field == "run_metadata"
    assert env.registry.created == []


async def test_prepare_run_error_is_a_tool_error(env: Env) -> None:
    """§7.3 step 9: a hook error is raised (as the ToolError's cause); a ToolError from the
    hook passes unchanged; nothing is created."""

    def broken(run: Run) -> Run:
        raise LookupError(SENTINEL)

    error = await refused(env.bundle(prepare_run=broken).call("workflow_run_start", start_args()))
    assert str(error) == "workflow tools: prepare_run failed (LookupError)"
    assert isinstance(error.cause, LookupError)
    mine = ToolError("workflow tools: artifact store unavailable")

    async def refusing(run: Run) -> Run:
        raise mine

    error = await refused(env.bundle(prepare_run=refusing).call("workflow_run_start", start_args()))
    assert error is mine
    assert env.registry.created == []


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_prepare_run_sets_artifact_namespace(env: Env, asynchronous: bool) -> None:
    """§12.81: prepare_run may set the artifact namespace (session, run, kind parent,
    input session, input run) and those values reach create (sync or async hook)."""
    parent = await env.start()
    await env.settle()
    namespace = {
        "artifact_session_id": "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
        "artifact_run_id": "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb",
        "artifact_input_kind": "parent",
        "artifact_input_session_id": env.session.session_id,
        "artifact_input_run_id": parent["run_id"],
    }

    def hook(run: Run) -> Run:
        return dataclasses.replace(run, **namespace)

    async def async_hook(run: Run) -> Run:
        await asyncio.sleep(0)
        return hook(run)

    tools = env.bundle(prepare_run=async_hook if asynchronous else hook)
    result = await tools.call("workflow_run_start", start_args(parent_run_id=parent["run_id"]))
    created = env.registry.created[-1]
    for name, value in namespace.items():
        assert getattr(created, name) == value
        assert getattr(await env.record(result["run_id"]), name) == value
    assert set(result) <= RUN_KEYS
    await env.settle()


class StubSupervisor:
    """A supervisor whose start hands back ``ticket`` (or raises ``error``)."""

    def __init__(self, ticket: Any = None, error: Exception | None = None) -> None:
        self.ticket = ticket
        self.error = error

    async def start(self, run_id: str) -> Any:
        if self.error is not None:
            raise self.error
        return self.ticket

    async def resume(self, run_id: str, payload: bytes) -> None: ...

    async def cancel(self, run_id: str, reason: str) -> None: ...

    async def history(self, run_id: str, **kw: Any) -> None: ...


def ticket() -> StartTicket:
    loop = asyncio.get_running_loop()
    return StartTicket(loop.create_future(), loop.create_future())


async def test_start_timeout_names_the_created_run(env: Env) -> None:
    """§7.3 step 12: when the seed is not observed in time, the error says the run was
    created (with its ID) and its first checkpoint was not observed; the run exists."""
    tools = env.bundle(supervisor=StubSupervisor(ticket()), start_timeout=0.05)
    error = await refused(tools.call("workflow_run_start", start_args()))
    message = str(error)
    assert f"run {ID2} was created" in message
    assert "first checkpoint was not observed" in message
    assert isinstance(error.cause, TimeoutError)
    assert (await env.record(ID2)).status is RunStatus.PENDING


async def test_start_failure_is_raised(env: Env) -> None:
    """§7.3 step 12: a failed start raises its error (as the cause)."""
    failing = ticket()
    failure = AdoptionError(ID2, "load input", OSError("disk"))
    failing.failed.set_result(failure)
    tools = env.bundle(supervisor=StubSupervisor(failing))
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert str(error) == f"workflow tools: start run: run {ID2}: load input failed"
    assert error.cause is failure


async def test_start_channel_and_immediate_errors(env: Env) -> None:
    """§7.3 step 11: an immediate start error is raised; a missing ticket is an invalid
    result channel."""
    tools = env.bundle(supervisor=StubSupervisor(None))
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert str(error) == f"workflow tools: start run: run {ID2}: invalid result channels"
    tools = env.bundle(
        supervisor=StubSupervisor(error=RuntimeError("supervisor is not accepting work"))
    )
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert str(error) == "workflow tools: start run: the workflow supervisor is not accepting work"


async def test_start_on_a_stopped_supervisor(env: Env) -> None:
    """§7.3 step 11: after shutdown the real supervisor refuses work; the run stays
    pending for the next owner to adopt."""
    await env.supervisor.shutdown()
    error = await refused(env.tools.call("workflow_run_start", start_args()))
    assert "the workflow supervisor is not accepting work" in str(error)
    assert (await env.record(ID2)).status is RunStatus.PENDING


async def test_started_run_that_fails_is_reported(env: Env) -> None:
    """§7.3 step 12: if the supervisor fails the run before seeding it (here its input
    blob vanished), start raises instead of returning a result."""

    class VanishingInputs:
        async def put(self, session_id: str, canonical: bytes) -> InputReference:
            digest = hashlib.sha256(canonical).hexdigest()
            key = f"sessions/{session_id}/workflows/inputs/sha256/{digest}"
            return InputReference(digest, key, len(canonical))  # never stored

    tools = env.bundle(inputs=VanishingInputs())
    error = await refused(tools.call("workflow_run_start", start_args()))
    assert str(error).startswith("workflow tools: start run")
    assert ID2 in str(error)
    await env.settle()
    assert (await env.record(ID2)).status is RunStatus.FAILED


async def test_input_store_error(env: Env) -> None:
    """§7.3 step 6: an input store error is raised; no record is created."""

    class BrokenInputs:
        async def put(self, session_id: str, canonical: bytes) -> InputReference:
            raise OSError(f"cannot write sessions/{session_id}/...")

    error = await refused(
        env.bundle(inputs=BrokenInputs()).call("workflow_run_start", start_args())
    )
    assert str(error) == "workflow tools: store input failed (OSError)"
    assert env.session.session_id not in str(error)
    assert env.registry.created == []
