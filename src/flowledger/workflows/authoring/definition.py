"""Workflow definitions: a flow graph with metadata, strict input and resume validation.

A `Definition` is what the catalog stores and the supervisor drives. `TypedDefinition`
is the standard one: it binds `Metadata` to a `flow.Runner`.

Validation produces *tokens* (`ValidatedInput`, `ValidatedResume`): the only way to start
or resume a run is with a token made by the very registration that checks it. Tokens are
matched by identity with a private registration object that `registered_copy` creates,
so a hand-made token, a token of another definition, or a token of the same definition
registered in another catalog is refused. An unregistered definition validates nothing.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from flowledger import flow
from flowledger.clock import Clock

from ..errors import DefinitionError, InvalidInputError, InvalidSchemaError
from .metadata import Metadata, bound_summary
from .metadata import schema_bytes as _schema_bytes
from .readiness import GRAPH_CHANGED, Diagnostic
from .schema import BoundedJSONError, CompiledSchema, compile_schema, decode_document
from .state_fields import check_state_fields

__all__ = [
    "Definition",
    "ErrorPolicy",
    "TypedDefinition",
    "ValidatedInput",
    "ValidatedResume",
    "WorkflowResult",
]

log = logging.getLogger("flowledger.workflows.authoring.definition")

S = TypeVar("S")

ErrorPolicy = Literal["pause", "fail"]

NOT_REGISTERED = "definition is not registered"
RESUME_NOT_SUPPORTED = "resume is not supported"
FOREIGN_TOKEN = "validation token does not belong to this definition"


@dataclass(frozen=True)
class WorkflowResult:
    """One view of a graph run: its run record, its state as a JSON object, what paused
    or halted it (at most one of ``interrupts`` and ``halt`` is set) and a status summary
    of at most 1024 UTF-8 bytes (``""`` without a summarizer)."""

    run: flow.RunRecord
    state: dict[str, Any]
    interrupts: list[flow.Interruption] | None
    halt: flow.Halt | None
    summary: str


class _Token:
    __slots__ = ("_owner", "_value")

    def __init__(self, owner: object = None, value: Any = None) -> None:
        self._owner = owner
        self._value = value

    @property
    def value(self) -> Any:
        return self._value

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<opaque>)"


class ValidatedInput(_Token):
    """A validated, decoded input: the typed initial state in ``value``. Only the
    registration that made it accepts it; a hand-made one is refused everywhere."""


class ValidatedResume(_Token):
    """A validated, decoded resume payload in ``value``. Only the registration that made
    it accepts it; a hand-made one is refused everywhere."""


@runtime_checkable
class Definition(Protocol):
    """A workflow definition as the catalog and the supervisor use it.

    Engine errors (``flow.CheckpointNotFoundError``, ``flow.ResumeTerminalError``,
    revision conflicts, store errors, ...) pass through unchanged."""

    def metadata(self) -> Metadata:
        """The definition's metadata (immutable)."""
        ...

    @property
    def on_error(self) -> ErrorPolicy:
        """What a task that raises (after its retries, with no error route) does to the
        run: ``"pause"`` (an errored pause, resumable by retrying) or ``"fail"``."""
        ...

    def validate_input(self, raw: bytes | str) -> ValidatedInput:
        """Check and decode an input document; `InvalidInputError` (field ``input``)."""
        ...

    def validate_resume(
        self, raw: bytes | str, *, vertices: Sequence[str] = (), deadline: bool = False
    ) -> ValidatedResume:
        """Check and decode a resume payload for the paused ``vertices`` (their own resume
        schemas where they have one, else the definition's); `InvalidInputError` (field
        ``resume``). ``deadline``: the payload is the pause's ``on_timeout``, sent by its
        owner because the deadline passed (the vertex sees `flow.timed_out`)."""
        ...

    def resume_schema_for(self, vertices: Sequence[str]) -> dict[str, Any] | None:
        """The resume schema a payload for the paused ``vertices`` must match, or None."""
        ...

    async def start(
        self, token: ValidatedInput, *, graph_run_id: str, hooks: Sequence[flow.Hooks] = ()
    ) -> WorkflowResult:
        """Run a new graph execution with the given graph run id."""
        ...

    async def check_resume(self, graph_run_id: str) -> tuple[Diagnostic, ...]:
        """Why the interrupted run cannot be continued by this definition now (empty when
        it can): a checkpoint written by another graph, and whatever a subclass adds.
        Errors of an unusable checkpoint (missing, corrupt) pass through. Inside
        `readiness.environment_deferred` only what needs nothing outside this process."""
        ...

    def resuming(self, graph_run_id: str) -> AbstractAsyncContextManager[None]:
        """The span of one resume by the run's owner, under the run's lock: the check
        (`check_resume`) and the `resume` that follows it. A definition may keep what its
        check opened (a deployed run's source sessions) for the resumed segment; all of
        it is released when the span ends, whether the run was resumed or not."""
        ...

    async def resume(
        self,
        graph_run_id: str,
        token: ValidatedResume | None,
        *,
        hooks: Sequence[flow.Hooks] = (),
    ) -> WorkflowResult:
        """Continue an interrupted (or halted) execution: with a validated payload for a
        request pause, with ``None`` to retry an errored pause."""
        ...

    async def adopt(self, graph_run_id: str, *, hooks: Sequence[flow.Hooks] = ()) -> WorkflowResult:
        """Continue a durable RUNNING checkpoint after an owner restart, with no payload.
        Never for interrupted checkpoints (that would re-pause them)."""
        ...

    async def get(self, graph_run_id: str) -> WorkflowResult:
        """The run as its latest checkpoint describes it; runs nothing."""
        ...

    async def history(self, graph_run_id: str) -> list[flow.RunRecord]:
        """The run record of every checkpoint, in revision order."""
        ...

    async def checkpoint_history(self, graph_run_id: str) -> list[flow.Checkpoint]:
        """Every checkpoint, in revision order."""
        ...

    async def checkpoint_page(
        self, graph_run_id: str, *, after: int, limit: int
    ) -> list[flow.Checkpoint]:
        """At most ``limit`` checkpoints with revision > ``after``, in revision order
        (activity projection reads a run's history this way, a bounded page at a time)."""
        ...

    async def cancel(self, graph_run_id: str, reason: str) -> None:
        """Append a terminal cancelled checkpoint."""
        ...

    def registered_copy(self) -> Definition:
        """The catalog-owned copy: schemas compiled now, with a fresh token owner."""
        ...


class _Registration:
    """The identity tokens are checked against, and the schemas compiled for it."""

    __slots__ = ("input_schema", "resume_schema", "vertex_schemas")

    def __init__(
        self,
        input_schema: CompiledSchema,
        resume_schema: CompiledSchema | None,
        vertex_schemas: dict[str, CompiledSchema],
    ) -> None:
        self.input_schema = input_schema
        self.resume_schema = resume_schema
        self.vertex_schemas = vertex_schemas


def _identity(payload: dict[str, Any]) -> Any:
    return payload


class TypedDefinition(Generic[S]):
    """A definition over a `flow.Runner` whose states have type ``S``.

    * ``state_decoder`` turns a validated input object into the initial state; by default
      the runner's state codec (pydantic) does it. The input schema is closed
      (``additionalProperties: false`` everywhere), so unknown fields never reach it.
      A decoder that raises `InvalidInputError` refuses the caller's document; any other
      exception from a decoder (state or resume) means the definition is wrong, since
      the document passed its schema: `DefinitionError`, naming the state field.
    * ``resume_decoder`` turns a validated resume object into the payload that
      `flow.interrupt` returns. **Divergence from the reference**, which requires one
      with a resume schema: by default the validated object itself is the payload.
      Resume is supported exactly when the metadata has a resume schema.
    * ``resume_schemas`` gives vertices their own resume schema (vertex id -> schema),
      for definitions whose interrupts ask different questions; a payload for a pause of
      such a vertex must match its schema, not the metadata's.
    * ``summarizer`` makes the status summary from a state; its text is bounded to 1024
      bytes. A summarizer that raises (or returns a non-string) is logged and gives
      ``""``: the run's checkpoint is already durable and must not be reported as failed.

    Numbers reach the decoders as JSON numbers do in Python: integers as ``int``, every
    other number as a finite ``float`` (validation itself used exact decimals).

    Construction raises `InvalidSchemaError`: field ``definition`` for a bad metadata,
    runner, state decoder or summarizer; ``resume decoder`` for a bad resume decoder;
    ``vertex ID`` when a vertex descriptor names a vertex the graph does not have.

    ``max_steps`` is the engine's step budget for the run (``flow.Runner.run``; default
    10,000 super-steps, counted over the run's whole life, not per segment): a run that
    reaches it halts, resumable, rather than looping forever. Its history is
    unlimited up to the checkpoint store's limit (``flow.ledger_store.MAX_HISTORY``)."""

    __slots__ = (
        "_default_decoder",
        "_max_steps",
        "_metadata",
        "_on_error",
        "_registration",
        "_resume_decoder",
        "_resume_schemas",
        "_runner",
        "_state_decoder",
        "_summarizer",
    )

    def __init__(
        self,
        metadata: Metadata,
        runner: flow.Runner[S],
        *,
        state_decoder: Callable[[dict[str, Any]], S] | None = None,
        resume_decoder: Callable[[dict[str, Any]], Any] | None = None,
        summarizer: Callable[[S], str] | None = None,
        on_error: ErrorPolicy = "pause",
        resume_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        max_steps: int | None = None,
    ) -> None:
        if on_error not in ("pause", "fail"):
            raise InvalidSchemaError("definition", 'on_error must be "pause" or "fail"')
        if not isinstance(metadata, Metadata):
            raise InvalidSchemaError("definition", "metadata must be a workflows.Metadata")
        if not isinstance(runner, flow.Runner):
            raise InvalidSchemaError("definition", "runner must be a flow.Runner")
        if state_decoder is not None and not callable(state_decoder):
            raise InvalidSchemaError("definition", "state decoder is not callable")
        if summarizer is not None and not callable(summarizer):
            raise InvalidSchemaError("definition", "summarizer is not callable")
        if resume_decoder is not None and not callable(resume_decoder):
            raise InvalidSchemaError("resume decoder", "resume decoder is not callable")
        graph_vertices = runner.graph.vertices
        for vertex in metadata.vertices:
            if vertex.id is not None and vertex.id not in graph_vertices:
                raise InvalidSchemaError(
                    "vertex ID", f"graph {runner.graph_id!r} has no vertex {vertex.id!r}"
                )
        self._metadata = metadata
        self._runner = runner
        self._state_decoder: Callable[[dict[str, Any]], S] = (
            runner.graph.codec.load if state_decoder is None else state_decoder
        )
        self._default_decoder = state_decoder is None
        self._resume_decoder: Callable[[dict[str, Any]], Any] = (
            _identity if resume_decoder is None else resume_decoder
        )
        self._summarizer = summarizer
        self._on_error: ErrorPolicy = on_error
        self._resume_schemas: dict[str, bytes] = {}
        for vertex_id, schema in (resume_schemas or {}).items():
            if vertex_id not in graph_vertices:
                raise InvalidSchemaError(
                    "vertex ID", f"graph {runner.graph_id!r} has no vertex {vertex_id!r}"
                )
            self._resume_schemas[vertex_id] = _schema_bytes(schema, "resume")
        if max_steps is not None and (
            isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
        ):
            raise InvalidSchemaError("definition", "max_steps must be a positive int")
        self._max_steps = max_steps
        self._registration: _Registration | None = None

    @property
    def runner(self) -> flow.Runner[S]:
        return self._runner

    @property
    def on_error(self) -> ErrorPolicy:
        return self._on_error

    def with_checkpoints(
        self, checkpoints: flow.CheckpointStore, *, clock: Clock | None = None
    ) -> TypedDefinition[S]:
        """An unregistered copy whose runner keeps its checkpoints in ``checkpoints`` and
        runs on ``clock`` (default: the clock it has)."""
        rebound: TypedDefinition[S] = copy.copy(self)
        rebound._runner = flow.Runner(
            self._runner.graph, checkpoints, clock=clock or self._runner.clock
        )
        rebound._registration = None
        return rebound

    def metadata(self) -> Metadata:
        return self._metadata

    def registered_copy(self) -> TypedDefinition[S]:
        """Compile the input schema (field ``input``) and the resume schema, if any
        (field ``resume``), and return a shallow copy owning a fresh registration.

        With the default state decoder, every input-schema property must also be a field
        of the state type, of a type that can hold the property's values (see
        `check_state_fields`): otherwise `InvalidSchemaError` (field ``input``) now,
        rather than inputs silently dropped or refused at run time."""
        input_schema = compile_schema(self._metadata.input_schema_bytes, "input")
        if self._default_decoder:
            check_state_fields(
                json.loads(self._metadata.input_schema_bytes), self._runner.graph.codec.state_type
            )
        resume_bytes = self._metadata.resume_schema_bytes
        resume_schema = None if resume_bytes is None else compile_schema(resume_bytes, "resume")
        vertex_schemas = {
            vertex: compile_schema(data, f"resume schema of vertex {vertex}")
            for vertex, data in self._resume_schemas.items()
        }
        registered = copy.copy(self)
        registered._registration = _Registration(input_schema, resume_schema, vertex_schemas)
        return registered

    # -- validation ------------------------------------------------------------------------

    def validate_input(self, raw: bytes | str) -> ValidatedInput:
        """Bounded decode (a JSON object), the compiled input schema, then the state
        decoder; any failure is `InvalidInputError` (field ``input``) with the cause."""
        registration = self._registration
        if registration is None:
            raise InvalidInputError("input", NOT_REGISTERED)
        document = _check_document(raw, registration.input_schema, "input")
        try:
            state = self._state_decoder(document)
        except InvalidInputError:
            raise  # a custom decoder's own refusal of the caller's document
        except Exception as exc:
            raise self._broken("input", exc) from exc
        self._check_state(state)
        return ValidatedInput(registration, state)

    def _broken(self, field: str, exc: Exception) -> DefinitionError:
        """The document passed the schema, so a decoder that refuses it is the
        definition's mistake: name the state field when the codec says which."""
        path = ""
        if isinstance(exc, flow.CodecError) and exc.path.startswith("state."):
            path = exc.path[len("state.") :]
        detail = exc.detail if isinstance(exc, flow.CodecError) else exc
        return DefinitionError(self._metadata.name, self._metadata.version, field, path, detail)

    def validate_resume(
        self, raw: bytes | str, *, vertices: Sequence[str] = (), deadline: bool = False
    ) -> ValidatedResume:
        """Like `validate_input` for a resume payload (field ``resume``), against the
        resume schema of each paused vertex in ``vertices`` that has its own, else the
        definition's; without a registration or any schema: ``"resume is not
        supported"``. With ``deadline`` the payload reaches the vertex as
        `flow.TimedOut` (the owner's resume of an expired deadline)."""
        registration = self._registration
        if registration is None:
            raise InvalidInputError("resume", RESUME_NOT_SUPPORTED)
        schemas = [
            registration.vertex_schemas[v] for v in vertices if v in registration.vertex_schemas
        ]
        if not schemas and registration.resume_schema is not None:
            schemas = [registration.resume_schema]
        if not schemas:
            raise InvalidInputError("resume", RESUME_NOT_SUPPORTED)
        for schema in schemas:
            document = _check_document(raw, schema, "resume")
        try:
            payload = self._resume_decoder(document)
        except InvalidInputError:
            raise
        except Exception as exc:
            raise self._broken("resume", exc) from exc
        return ValidatedResume(registration, flow.TimedOut(payload) if deadline else payload)

    def resume_schema_for(self, vertices: Sequence[str]) -> dict[str, Any] | None:
        for vertex in vertices:
            data = self._resume_schemas.get(vertex)
            if data is not None:
                parsed: dict[str, Any] = json.loads(data)
                return parsed
        return self._metadata.resume_schema

    def _check_state(self, state: Any) -> None:
        state_type = self._runner.graph.codec.state_type
        if not isinstance(state_type, type):
            return  # a generic alias or similar: the runner's codec checks it at start
        try:
            ok = isinstance(state, state_type)
        except TypeError:  # TypedDict classes refuse isinstance; their values are dicts
            ok = isinstance(state, dict)
        if not ok:
            raise DefinitionError(
                self._metadata.name,
                self._metadata.version,
                "input",
                "",
                f"the state decoder returned {type(state).__name__}, not {state_type.__name__}",
            )

    def _owned(self, token: object, kind: type[_Token], field: str) -> Any:
        registration = self._registration
        if registration is None or not isinstance(token, kind) or token._owner is not registration:
            raise InvalidInputError(field, FOREIGN_TOKEN)
        return token._value

    # -- execution -------------------------------------------------------------------------

    async def start(
        self, token: ValidatedInput, *, graph_run_id: str, hooks: Sequence[flow.Hooks] = ()
    ) -> WorkflowResult:
        """Run the token's state as a new graph run ``graph_run_id`` (the id must be
        unused: ``flow.GraphRunExistsError`` otherwise)."""
        state = self._owned(token, ValidatedInput, "input")
        self._check_state(state)
        result = await self._runner.run(
            state, run_id=graph_run_id, hooks=tuple(hooks), max_steps=self._max_steps
        )
        return self._result(result)

    @asynccontextmanager
    async def resuming(self, graph_run_id: str) -> AsyncIterator[None]:
        """Nothing to keep between the check and the resume (see `Definition.resuming`)."""
        yield

    async def check_resume(self, graph_run_id: str) -> tuple[Diagnostic, ...]:
        try:
            await self._runner.check_resumable(graph_run_id)
        except (
            flow.GraphMismatchError,
            flow.GraphVersionMismatchError,
            flow.UnknownVertexError,
        ) as exc:
            return (self._graph_changed(exc),)
        return ()

    def _graph_changed(self, error: flow.FlowError) -> Diagnostic:
        label = self._label()
        if isinstance(error, flow.GraphVersionMismatchError):
            stored, current = _version_text(error.actual), _version_text(error.expected)
            detail = (
                f"its checkpoint was written by graph version {stored}; {label} is now {current}"
            )
        elif isinstance(error, flow.GraphMismatchError):
            detail = f"its checkpoint belongs to graph {error.actual!r}, not {error.expected!r}"
        else:
            detail = f"its checkpoint names a vertex the registered graph does not have ({error})"
        return Diagnostic(
            GRAPH_CHANGED,
            f"the graph of {label} changed since this run started: {detail}",
            "register the graph this run started with under its own definition version "
            "(keep the old code for these runs, register the changed graph as a new "
            "version for new runs), or start a new run",
        )

    async def resume(
        self,
        graph_run_id: str,
        token: ValidatedResume | None,
        *,
        hooks: Sequence[flow.Hooks] = (),
    ) -> WorkflowResult:
        payload = None if token is None else self._owned(token, ValidatedResume, "resume")
        result = await self._runner.resume(
            graph_run_id, payload, hooks=tuple(hooks), max_steps=self._max_steps
        )
        return self._result(result)

    async def adopt(self, graph_run_id: str, *, hooks: Sequence[flow.Hooks] = ()) -> WorkflowResult:
        result = await self._runner.resume(
            graph_run_id, None, hooks=tuple(hooks), max_steps=self._max_steps
        )
        return self._result(result)

    async def fork(
        self, graph_run_id: str, revision: int, patch: Any, *, run_id: str
    ) -> flow.ForkOrigin:
        """Write revision 0 of graph run ``run_id``, forked from ``graph_run_id`` at
        ``revision`` with the state ``patch``-ed (`flow.Runner.fork`, whose errors it
        raises); return the recorded origin."""
        await self._runner.fork(graph_run_id, revision, patch, run_id=run_id)
        seed = await self._runner.history(run_id, limit=1)
        origin = seed[0].origin
        assert origin is not None
        return origin

    async def fork_plan(self, graph_run_id: str, revision: int, *, after: bool) -> flow.ForkPlan:
        """What `fork` of ``revision`` (with ``after``: of the end of its step) would do
        (`flow.Runner.fork_plan`, whose errors it raises); writes nothing."""
        return await self._runner.fork_plan(graph_run_id, revision, after=after)

    async def get(self, graph_run_id: str) -> WorkflowResult:
        return self._result(await self._runner.get(graph_run_id))

    async def history(self, graph_run_id: str) -> list[flow.RunRecord]:
        return [cp.run for cp in await self._runner.history(graph_run_id)]

    async def checkpoint_history(self, graph_run_id: str) -> list[flow.Checkpoint]:
        return await self._runner.history(graph_run_id)

    async def checkpoint_page(
        self, graph_run_id: str, *, after: int, limit: int
    ) -> list[flow.Checkpoint]:
        return await self._runner.history(graph_run_id, after=after, limit=limit)

    async def cancel(self, graph_run_id: str, reason: str) -> None:
        await self._runner.cancel(graph_run_id, reason)

    def _result(self, result: flow.Result[S]) -> WorkflowResult:
        # Dumped before the summarizer sees the state, so it cannot change what we report.
        state = self._runner.graph.codec.dump(result.state)
        summary = ""
        if self._summarizer is not None:
            try:
                text = self._summarizer(result.state)
            except Exception as exc:
                # The type only: an exception's message may quote the state, which logs
                # must never carry.
                log.error(
                    "summarizer of %s raised %s; summary left empty",
                    self._label(),
                    type(exc).__name__,
                )
            else:
                if isinstance(text, str):
                    summary = bound_summary(text)
                else:
                    log.error(
                        "summarizer of %s returned %s, not str; summary left empty",
                        self._label(),
                        type(text).__name__,
                    )
        return WorkflowResult(result.run, state, result.interrupts, result.halt, summary)

    def _label(self) -> str:
        return f"{self._metadata.name}@{self._metadata.version}"

    def __repr__(self) -> str:
        state = "registered" if self._registration is not None else "unregistered"
        return f"TypedDefinition({self._label()}, {state})"


def _version_text(version: str) -> str:
    """``"1 (topology 3fa9c2e1b0d4)"`` for a compiled graph version ``<sha256>:<version>``."""
    fingerprint, _, declared = version.partition(":")
    return f"{declared!r} (topology {fingerprint[:12]})" if declared else repr(version)


def _check_document(raw: bytes | str, schema: CompiledSchema, field: str) -> dict[str, Any]:
    try:
        document = decode_document(raw)
        schema.validate(document)
        plain: dict[str, Any] = _plain_numbers(document)
        return plain
    except (BoundedJSONError, ValueError) as exc:  # SchemaValidationError is a ValueError
        raise InvalidInputError(field, exc) from exc


def _plain_numbers(value: Any) -> Any:
    """``value`` with every `Decimal` as a float; a number a float cannot hold (such as
    ``1e400``) is refused rather than turned into infinity."""
    if isinstance(value, Decimal):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"number {value} is out of range")
        return number
    if isinstance(value, dict):
        return {key: _plain_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_numbers(item) for item in value]
    return value
