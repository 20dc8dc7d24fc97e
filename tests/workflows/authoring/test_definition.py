"""Definitions over a real counter workflow: workflows-spec §1.5, §1.6 and checklist
§12.1-3, §12.5 (§12.4 is in test_metadata.py)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import pydantic
import pytest

from flowledger import flow
from flowledger.flow import RunStatus
from flowledger.workflows.authoring.definition import (
    Definition,
    TypedDefinition,
    ValidatedInput,
    ValidatedResume,
    WorkflowResult,
)
from flowledger.workflows.authoring.metadata import Metadata, VertexMetadata
from flowledger.workflows.errors import DefinitionError, InvalidInputError, InvalidSchemaError
from flowledger.workflows.runtime.catalog import Catalog

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["count"],
    "properties": {"count": {"type": "integer", "minimum": 0}},
}
RESUME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["increment"],
    "properties": {"increment": {"type": "integer"}},
}
RUN_ID = "00000000-0000-4000-8000-000000000001"
RUN_ID_2 = "00000000-0000-4000-8000-000000000002"


class Counter(pydantic.BaseModel):
    count: int


def counter_runner(
    store: flow.CheckpointStore | None = None, *, gated: bool = False
) -> flow.Runner[Counter]:
    """``increment`` (count + 1); gated: then ``approve``, which interrupts with
    "awaiting increment" and adds the resume payload's ``increment``."""
    if store is None:
        store = flow.MemoryCheckpointStore()
    graph: flow.Graph[Counter] = flow.Graph("counter", state=Counter)

    @graph.vertex("increment")
    def increment(state: Counter) -> dict[str, Any]:
        return {"count": state.count + 1}

    if not gated:
        return graph.compile(entry="increment", finish="increment", store=store)

    @graph.vertex("approve")
    def approve(state: Counter) -> dict[str, Any]:
        answer = flow.interrupt("awaiting increment")
        return {"count": state.count + answer["increment"]}

    graph.add_edge("increment", "approve")
    return graph.compile(entry="increment", finish="approve", store=store)


def repeat_x(state: Counter) -> str:
    return "x" * state.count


def counter_definition(
    name: str = "counter",
    version: str = "v1",
    *,
    runner: flow.Runner[Counter] | None = None,
    gated: bool = False,
    input_schema: Any = None,
    resume_schema: Any = None,
    description: str = "Counts by one.",
    **options: Any,
) -> TypedDefinition[Counter]:
    """An unregistered counter definition (the gated one has a resume schema)."""
    if resume_schema is None and gated:
        resume_schema = RESUME_SCHEMA
    vertices = [VertexMetadata("Increment", "increment")]
    if gated:
        vertices.append(VertexMetadata("Approve", "approve"))
    metadata = Metadata(
        name,
        version,
        description=description,
        input_schema=INPUT_SCHEMA if input_schema is None else input_schema,
        resume_schema=resume_schema,
        vertices=vertices,
    )
    options.setdefault("summarizer", repeat_x)
    return TypedDefinition(metadata, runner or counter_runner(gated=gated), **options)


def registered(**kwargs: Any) -> TypedDefinition[Counter]:
    return counter_definition(**kwargs).registered_copy()


def invalid(field: str, exc: pytest.ExceptionInfo[InvalidInputError]) -> str:
    assert exc.value.field == field
    return str(exc.value)


# -- §12.1-3, §12.5 ----------------------------------------------------------------------


async def test_checklist_1_counter_round_trip() -> None:
    """§12.1 a hand-made (empty) token is refused with the invalid-input kind; an unknown
    field fails validation; {"count":1} starts, the one-vertex counter yields count 2,
    summary "xx", and history() ends with the same graph run id."""
    definition = registered()
    with pytest.raises(InvalidInputError) as caught:
        await definition.start(ValidatedInput(), graph_run_id=RUN_ID)
    assert "does not belong to this definition" in invalid("input", caught)
    with pytest.raises(InvalidInputError) as caught:
        definition.validate_input('{"count":1,"unknown":2}')
    assert "$.unknown: additional property not allowed" in invalid("input", caught)

    token = definition.validate_input('{"count":1}')
    assert token.value == Counter(count=1)
    result = await definition.start(token, graph_run_id=RUN_ID)
    assert isinstance(result, WorkflowResult)
    assert result.run.status is RunStatus.COMPLETED
    assert result.run.graph_run_id == RUN_ID
    assert result.state == {"count": 2}
    assert result.summary == "xx"
    assert result.interrupts is None and result.halt is None
    history = await definition.history(RUN_ID)
    assert history[-1].graph_run_id == RUN_ID
    assert history[-1].status is RunStatus.COMPLETED
    assert [r.revision for r in history] == list(range(len(history)))


async def test_checklist_2_resume_validation_is_strict() -> None:
    """§12.2 {"increment":1,"extra":2} fails resume validation (invalid-input, field
    resume); a valid resume completes the interrupted run."""
    definition = registered(gated=True)
    started = await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    assert started.run.status is RunStatus.INTERRUPTED
    assert started.interrupts is not None
    assert [(i.vertex, i.info) for i in started.interrupts] == [("approve", "awaiting increment")]
    assert started.state == {"count": 2}
    with pytest.raises(InvalidInputError) as caught:
        definition.validate_resume('{"increment":1,"extra":2}')
    assert "$.extra: additional property not allowed" in invalid("resume", caught)
    with pytest.raises(InvalidInputError) as caught:
        definition.validate_resume('{"increment":"one"}')
    assert "$.increment" in invalid("resume", caught)

    resumed = await definition.resume(RUN_ID, definition.validate_resume('{"increment":2}'))
    assert resumed.run.status is RunStatus.COMPLETED
    assert resumed.state == {"count": 4}
    assert resumed.summary == "xxxx"


async def test_checklist_3_tokens_belong_to_one_registration() -> None:
    """§12.3 a token of one registered definition is refused by another (invalid-input),
    for both input and resume, including two registrations of one definition."""
    original = counter_definition(gated=True)
    first = original.registered_copy()
    second = original.registered_copy()
    other = registered(name="other_counter", gated=True)
    token = first.validate_input('{"count":1}')
    resume_token = first.validate_resume('{"increment":1}')
    for definition in (second, other, original):
        with pytest.raises(InvalidInputError) as caught:
            await definition.start(token, graph_run_id=RUN_ID)
        assert "does not belong" in invalid("input", caught)
        with pytest.raises(InvalidInputError) as caught:
            await definition.resume(RUN_ID, resume_token)
        assert "does not belong" in invalid("resume", caught)
    with pytest.raises(flow.CheckpointNotFoundError):
        await first.get(RUN_ID)  # nothing was started by any refusal


async def test_checklist_5_summary_is_bounded() -> None:
    """§12.5 input count 5000 → state 5001, summarizer output 5001 bytes → summary of
    exactly 1024 bytes."""
    definition = registered()
    result = await definition.start(
        definition.validate_input('{"count":5000}'), graph_run_id=RUN_ID
    )
    assert result.state == {"count": 5001}
    assert len(result.summary.encode()) == 1024
    assert (await definition.get(RUN_ID)).summary == result.summary


# -- registration and tokens -------------------------------------------------------------


def test_unregistered_definitions_validate_nothing() -> None:
    """§1.6 unregistered: validate_input → "definition is not registered",
    validate_resume → "resume is not supported"."""
    definition = counter_definition(gated=True)
    with pytest.raises(InvalidInputError) as caught:
        definition.validate_input('{"count":1}')
    assert invalid("input", caught).endswith("definition is not registered")
    with pytest.raises(InvalidInputError) as caught:
        definition.validate_resume('{"increment":1}')
    assert invalid("resume", caught).endswith("resume is not supported")


async def test_hand_made_tokens_are_refused() -> None:
    """§1.5 tokens cannot be fabricated: a token holding another owner, or a token of the
    wrong kind, is refused; nothing is started."""
    definition = registered(gated=True)
    fake_input = ValidatedInput(object(), Counter(count=1))
    with pytest.raises(InvalidInputError):
        await definition.start(fake_input, graph_run_id=RUN_ID)
    resume_token = definition.validate_resume('{"increment":1}')
    with pytest.raises(InvalidInputError):
        await definition.start(resume_token, graph_run_id=RUN_ID)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await definition.resume(RUN_ID, definition.validate_input('{"count":1}'))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await definition.resume(RUN_ID, ValidatedResume(None, {"increment": 1}))
    with pytest.raises(flow.CheckpointNotFoundError):
        await definition.get(RUN_ID)
    assert "Counter" not in repr(fake_input)  # opaque


def test_resume_without_a_resume_schema_is_not_supported() -> None:
    """§1.6 resume needs a resume schema: a registered definition without one refuses,
    even with a resume decoder."""
    for definition in (registered(), registered(resume_decoder=lambda d: d)):
        with pytest.raises(InvalidInputError) as caught:
            definition.validate_resume('{"increment":1}')
        assert invalid("resume", caught).endswith("resume is not supported")


async def test_default_resume_decoder_is_the_validated_object() -> None:
    """§1.6 (our divergence: the reference requires a resume decoder with a resume schema
    and raises InvalidSchemaError('resume decoder')) by default the validated object is
    the payload flow.interrupt returns."""
    definition = registered(gated=True)
    token = definition.validate_resume('{"increment":3}')
    assert token.value == {"increment": 3}
    await definition.start(definition.validate_input('{"count":0}'), graph_run_id=RUN_ID)
    assert (await definition.resume(RUN_ID, token)).state == {"count": 4}


async def test_custom_decoders_are_used() -> None:
    """§1.6 the state decoder makes the initial state, the resume decoder the payload."""
    definition = registered(
        gated=True,
        state_decoder=lambda doc: Counter(count=doc["count"] * 10),
        resume_decoder=lambda doc: {"increment": doc["increment"] + 100},
    )
    assert definition.validate_input('{"count":2}').value == Counter(count=20)
    assert definition.validate_resume('{"increment":1}').value == {"increment": 101}
    started = await definition.start(definition.validate_input('{"count":2}'), graph_run_id=RUN_ID)
    assert started.state == {"count": 21}
    resumed = await definition.resume(RUN_ID, definition.validate_resume('{"increment":1}'))
    assert resumed.state == {"count": 122}


def test_decoder_failures_are_definition_errors() -> None:
    """§1.6, changed (usability 2): the document passed the schema, so a decoder that
    raises is the definition's mistake: DefinitionError (field input/resume) with the
    cause. A decoder's own InvalidInputError still refuses the caller's document."""

    def boom(doc: dict[str, Any]) -> Any:
        raise ValueError("decoder says no")

    definition = registered(gated=True, state_decoder=boom, resume_decoder=boom)
    with pytest.raises(DefinitionError, match="decoder says no") as broken:
        definition.validate_input('{"count":1}')
    assert broken.value.field == "input" and isinstance(broken.value.__cause__, ValueError)
    assert (broken.value.name, broken.value.version) == ("counter", "v1")
    assert not isinstance(broken.value, InvalidInputError)
    with pytest.raises(DefinitionError, match="decoder says no") as broken:
        definition.validate_resume('{"increment":1}')
    assert broken.value.field == "resume"

    def picky(doc: dict[str, Any]) -> Any:
        raise InvalidInputError("input", "count must be even")

    definition = registered(state_decoder=picky)
    with pytest.raises(InvalidInputError, match="count must be even") as caught:
        definition.validate_input('{"count":1}')
    assert invalid("input", caught)


def test_state_decoder_must_return_the_state_type() -> None:
    """§1.6 the token value must be of the state type (else the definition is broken)."""
    definition = registered(state_decoder=lambda doc: {"count": doc["count"]})
    with pytest.raises(DefinitionError, match="returned dict, not Counter"):
        definition.validate_input('{"count":1}')


def test_default_state_decoder_is_the_runner_codec() -> None:
    """§1.6 without a state decoder the runner's pydantic codec decodes the state, so
    its own rules apply after the schema's; a refusal names the state field and is the
    definition's error, not the caller's."""
    loose = {"type": "object", "additionalProperties": False, "properties": {"count": {}}}
    definition = registered(input_schema=loose)
    assert definition.validate_input('{"count":7}').value == Counter(count=7)
    with pytest.raises(DefinitionError, match="at state field 'count'") as broken:
        definition.validate_input('{"count":"many"}')
    assert broken.value.path == "count" and broken.value.field == "input"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b'{"count":1}{"count":2}',
        b'{"count":1,"count":2}',
        b"}",
        b'{"count":[1}',
        b'{"count":NaN}',
        b'{"count":-1}',
        b'{"count":1.5}',
        b"\xff",
    ],
)
def test_bad_input_documents_are_invalid_input(raw: bytes) -> None:
    """§1.4, §1.6 every decode or schema failure is InvalidInputError (field input)."""
    with pytest.raises(InvalidInputError) as caught:
        registered().validate_input(raw)
    assert invalid("input", caught)


async def test_numbers_reach_the_decoder_as_int_or_float() -> None:
    """§1.6 (Python build) integers stay int; other numbers become finite floats after
    exact validation; one a float cannot hold is refused."""
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"count": {"type": "integer"}, "ratio": {"type": "number"}},
    }
    seen: list[dict[str, Any]] = []

    def decoder(doc: dict[str, Any]) -> Counter:
        seen.append(doc)
        return Counter(count=doc.get("count", 0))

    definition = registered(input_schema=schema, state_decoder=decoder)
    definition.validate_input('{"count": 12345678901234567890, "ratio": 0.25}')
    assert seen[-1] == {"count": 12345678901234567890, "ratio": 0.25}
    assert type(seen[-1]["count"]) is int and type(seen[-1]["ratio"]) is float
    counts = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"count": {"type": "integer"}},
    }
    assert registered(input_schema=counts).validate_input('{"count": 2.0}').value == Counter(
        count=2
    )
    with pytest.raises(InvalidInputError, match="out of range"):
        definition.validate_input('{"ratio": 1e400}')


async def test_registered_copy_is_a_shallow_copy_with_compiled_schemas() -> None:
    """§2 registered_copy compiles the schemas (fields input/resume), returns a copy that
    shares metadata and runner; the original stays unregistered."""
    original = counter_definition(gated=True)
    copy_ = original.registered_copy()
    assert copy_ is not original
    assert copy_.metadata() is original.metadata()
    assert copy_.runner is original.runner
    assert "unregistered" in repr(original) and "registered" in repr(copy_)
    with pytest.raises(InvalidInputError):
        original.validate_input('{"count":1}')
    bad_input = counter_definition(input_schema={"type": "object"})
    with pytest.raises(InvalidSchemaError) as schema_error:
        bad_input.registered_copy()
    assert schema_error.value.field == "input"
    bad_resume = counter_definition(resume_schema={"type": "array"})
    with pytest.raises(InvalidSchemaError) as schema_error:
        bad_resume.registered_copy()
    assert schema_error.value.field == "resume"


def test_definitions_satisfy_the_protocol() -> None:
    """§1.5 TypedDefinition is a Definition (runtime-checkable protocol)."""
    assert isinstance(counter_definition(), Definition)
    assert isinstance(registered(), Definition)
    assert not isinstance(object(), Definition)


def test_construction_is_validated() -> None:
    """§1.6 construction errors are InvalidSchemaError naming the field."""
    metadata = counter_definition().metadata()
    runner = counter_runner()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("definition", {"metadata": None}),
        ("definition", {"metadata": metadata.to_json()}),
        ("definition", {"runner": None}),
        ("definition", {"runner": object()}),
        ("definition", {"state_decoder": "not callable"}),
        ("definition", {"summarizer": 42}),
        ("resume decoder", {"resume_decoder": "not callable"}),
    ]
    for field, override in cases:
        arguments: dict[str, Any] = {"metadata": metadata, "runner": runner, **override}
        with pytest.raises(InvalidSchemaError) as caught:
            TypedDefinition(arguments.pop("metadata"), arguments.pop("runner"), **arguments)
        assert caught.value.field == field, override


def test_vertex_ids_must_name_graph_vertices() -> None:
    """§1.1 (Python build) a vertex descriptor id must be a vertex of the runner's graph."""
    metadata = Metadata(
        "counter",
        "v1",
        input_schema=INPUT_SCHEMA,
        vertices=[VertexMetadata("Publish", "publish")],
    )
    with pytest.raises(InvalidSchemaError, match="no vertex 'publish'") as caught:
        TypedDefinition(metadata, counter_runner())
    assert caught.value.field == "vertex ID"


# -- execution ---------------------------------------------------------------------------


async def test_start_passes_the_graph_run_id_and_hooks() -> None:
    """§1.6 start runs the runner with the given graph run id and hooks."""
    started: list[str] = []
    hooks = flow.Hooks(on_run_start=lambda run: started.append(run.graph_run_id))
    definition = registered()
    token = definition.validate_input('{"count":1}')
    result = await definition.start(token, graph_run_id=RUN_ID, hooks=[hooks])
    assert result.run.graph_run_id == RUN_ID and started == [RUN_ID]
    # The same token may start another run: tokens carry a value, not a reservation.
    again = await definition.start(token, graph_run_id=RUN_ID_2)
    assert again.state == {"count": 2}


async def test_engine_errors_pass_through_unchanged() -> None:
    """§1.6 engine errors are returned unchanged: a reused graph run id, an unknown run
    (get/history/checkpoint_history/cancel), resuming or cancelling a terminal run."""
    definition = registered(gated=True)
    token = definition.validate_input('{"count":1}')
    await definition.start(token, graph_run_id=RUN_ID)
    with pytest.raises(flow.GraphRunExistsError):
        await definition.start(token, graph_run_id=RUN_ID)
    with pytest.raises(ValueError, match="not a canonical lowercase UUID"):
        await definition.start(token, graph_run_id="not-a-uuid")
    for call in (definition.get, definition.history, definition.checkpoint_history):
        with pytest.raises(flow.CheckpointNotFoundError):
            await call(RUN_ID_2)
    with pytest.raises(flow.CheckpointNotFoundError):
        await definition.cancel(RUN_ID_2, "x")
    await definition.resume(RUN_ID, definition.validate_resume('{"increment":1}'))
    with pytest.raises(flow.ResumeTerminalError):
        await definition.resume(RUN_ID, definition.validate_resume('{"increment":1}'))
    with pytest.raises(flow.ResumeTerminalError):
        await definition.cancel(RUN_ID, "too late")


async def test_get_reconstructs_the_latest_checkpoint() -> None:
    """§1.6 get rebuilds the result from the latest checkpoint: interrupts, state,
    summary; it runs nothing."""
    definition = registered(gated=True)
    await definition.start(definition.validate_input('{"count":3}'), graph_run_id=RUN_ID)
    view = await definition.get(RUN_ID)
    assert view.run.status is RunStatus.INTERRUPTED
    assert view.state == {"count": 4} and view.summary == "xxxx"
    assert view.interrupts is not None
    assert [(i.vertex, i.info) for i in view.interrupts] == [("approve", "awaiting increment")]
    assert (await definition.get(RUN_ID)).run.revision == view.run.revision


async def test_history_and_checkpoint_history() -> None:
    """§1.6 history is every checkpoint's run record in revision order; the full history
    is the checkpoints themselves."""
    definition = registered(gated=True)
    await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    await definition.resume(RUN_ID, definition.validate_resume('{"increment":1}'))
    runs = await definition.history(RUN_ID)
    checkpoints = await definition.checkpoint_history(RUN_ID)
    assert [cp.run for cp in checkpoints] == runs
    assert [r.revision for r in runs] == list(range(len(runs)))
    assert runs[0].status is RunStatus.RUNNING and runs[-1].status is RunStatus.COMPLETED
    assert RunStatus.INTERRUPTED in [r.status for r in runs]
    assert all(isinstance(cp, flow.Checkpoint) for cp in checkpoints)


async def test_cancel_appends_a_terminal_checkpoint() -> None:
    """§1.6 cancel delegates to the runner: a terminal cancelled checkpoint."""
    definition = registered(gated=True)
    await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    await definition.cancel(RUN_ID, "operator said so")
    view = await definition.get(RUN_ID)
    assert view.run.status is RunStatus.CANCELLED
    assert view.run.cancel_reason == "operator said so"
    assert view.interrupts is None


class CrashingStore(flow.MemoryCheckpointStore):
    """Fails the ``crash_at``-th append (1-based), as a process dying there would."""

    def __init__(self, crash_at: int) -> None:
        super().__init__()
        self.crash_at: int | None = crash_at
        self.appends = 0

    async def append(self, checkpoints: Sequence[flow.Checkpoint]) -> None:
        self.appends += 1
        if self.appends == self.crash_at:
            raise RuntimeError("simulated crash")
        await super().append(checkpoints)


async def test_adopt_continues_a_running_checkpoint() -> None:
    """§1.5 adopt continues a durable RUNNING checkpoint with no payload (after an owner
    restart), here through a fresh definition over the same store."""
    store = CrashingStore(crash_at=2)
    definition = registered(runner=counter_runner(store))
    with pytest.raises(RuntimeError, match="simulated crash"):
        await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    assert (await definition.get(RUN_ID)).run.status is RunStatus.RUNNING
    restarted = registered(runner=counter_runner(store))
    result = await restarted.adopt(RUN_ID)
    assert result.run.status is RunStatus.COMPLETED
    assert result.state == {"count": 2} and result.summary == "xx"


async def test_adopt_does_not_answer_an_interrupt() -> None:
    """§1.5 adopt carries no payload: an interrupted vertex pauses again."""
    definition = registered(gated=True)
    await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    result = await definition.adopt(RUN_ID)
    assert result.run.status is RunStatus.INTERRUPTED
    assert result.state == {"count": 2}


async def test_without_a_summarizer_the_summary_is_empty() -> None:
    """§1.6 no summarizer → summary ""."""
    definition = registered(summarizer=None)
    result = await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    assert result.summary == ""


async def test_a_failing_summarizer_does_not_fail_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """(Python build) a summarizer that raises or returns a non-string is logged and the
    summary is "": the checkpoint is already durable."""

    def broken(state: Counter) -> str:
        raise RuntimeError("summarizer bug")

    caplog.set_level(logging.ERROR, logger="flowledger.workflows.authoring.definition")
    definition = registered(summarizer=broken)
    result = await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    assert result.run.status is RunStatus.COMPLETED and result.summary == ""
    assert "raised RuntimeError" in caplog.text
    assert "summarizer bug" not in caplog.text  # messages may quote state: never logged
    numeric = registered(summarizer=lambda state: state.count)
    other = await numeric.start(numeric.validate_input('{"count":1}'), graph_run_id=RUN_ID_2)
    assert other.summary == "" and "returned int" in caplog.text


async def test_result_state_is_independent_of_the_summarizer() -> None:
    """§1.6 the result's state is the JSON object of the run's state, taken before the
    summarizer sees (and might mutate) it."""

    def meddling(state: Counter) -> str:
        state.count = 999
        return "meddled"

    definition = registered(summarizer=meddling)
    result = await definition.start(definition.validate_input('{"count":1}'), graph_run_id=RUN_ID)
    assert result.state == {"count": 2} and result.summary == "meddled"
    assert (await definition.get(RUN_ID)).state == {"count": 2}


async def test_plain_dict_states_work() -> None:
    """§1.6 a graph without a state type (plain dict states) works end to end; float
    numbers arrive as floats."""
    graph: flow.Graph[dict[str, Any]] = flow.Graph("halver")

    @graph.vertex("halve")
    def halve(state: dict[str, Any]) -> dict[str, Any]:
        return {"value": state["value"] / 2}

    runner = graph.compile(entry="halve", finish="halve", store=flow.MemoryCheckpointStore())
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"value": {"type": "number"}},
    }
    metadata = Metadata("halver", "1.0.0", input_schema=schema)
    definition = TypedDefinition(metadata, runner).registered_copy()
    result = await definition.start(
        definition.validate_input('{"value": 1.5}'), graph_run_id=RUN_ID
    )
    assert result.state == {"value": 0.75}


async def test_a_catalog_registration_drives_the_definition() -> None:
    """§2 the catalog's registered copy validates and starts (integration)."""
    catalog = Catalog()
    catalog.register(counter_definition())
    definition = catalog.resolve("counter", "v1")
    result = await definition.start(definition.validate_input('{"count":41}'), graph_run_id=RUN_ID)
    assert result.state == {"count": 42}


# -- usability 2: the input schema must fit the state type -------------------------------


class Order(pydantic.BaseModel):
    item: str
    quantity: int = 1
    price: float = 0.0
    note: str | None = None


def order_definition(properties: dict[str, Any], **options: Any) -> TypedDefinition[Order]:
    graph: flow.Graph[Order] = flow.Graph("order", state=Order)
    graph.add_vertex("place", lambda state: {})
    runner = graph.compile(entry="place", finish="place")
    metadata = Metadata(
        "order",
        "v1",
        description="Places an order.",
        input_schema={"type": "object", "additionalProperties": False, "properties": properties},
        vertices=[VertexMetadata("Place", "place")],
    )
    return TypedDefinition(metadata, runner, **options)


def test_registration_refuses_an_input_property_the_state_would_drop() -> None:
    definition = order_definition({"item": {"type": "string"}, "colour": {"type": "string"}})
    with pytest.raises(InvalidSchemaError, match="property 'colour' has no field") as caught:
        Catalog().register(definition)
    assert caught.value.field == "input"
    assert "state type Order" in str(caught.value)


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        (
            {"quantity": {"type": "string"}},
            "'quantity' allows string, but the state field Order.quantity holds integer",
        ),
        (
            {"quantity": {"type": "number"}},
            "allows number, but the state field Order.quantity holds integer",
        ),
        ({"note": {"type": "integer"}}, "Order.note holds string or null"),
    ],
)
def test_registration_refuses_types_the_state_cannot_hold(
    prop: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSchemaError, match=re.escape(message)):
        Catalog().register(order_definition({"item": {"type": "string"}, **prop}))


def test_registration_accepts_fitting_and_uncomparable_types() -> None:
    fitting = {
        "item": {"type": "string", "minLength": 1},
        "quantity": {"type": "integer"},
        "price": {"type": "integer"},  # an integer fits a number
        "note": {"enum": ["fast", "slow"]},  # no plain type: not compared
    }
    Catalog().register(order_definition(fitting))
    # with its own decoder the author maps the document; nothing to compare
    Catalog().register(
        order_definition(
            {"item": {"type": "string"}, "colour": {"type": "string"}},
            state_decoder=lambda doc: Order(item=doc["item"]),
        )
    )
