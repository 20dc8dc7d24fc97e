"""The run tools of workflows-spec §7, bound to one session: ``workflow_definition_list``
and ``workflow_run_{start,get,list,resume,cancel,history}``.

`WorkflowTools` is transport neutral: `WorkflowTools.infos` describes the tools (name,
description, JSON Schema of the arguments, whether the tool changes anything) and
`WorkflowTools.call` takes JSON arguments and returns a JSON-serialisable result, or
raises `ToolError`. The MCP server and the CLI put these on the wire; nothing here knows
about either. Every tool is bound to the bundle's session: no argument can name another.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import dataclasses
import inspect
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol, cast

from flowledger import flow, storage
from flowledger.workflows.activities.history import HistoryPage
from flowledger.workflows.admission import queued_at
from flowledger.workflows.authoring.definition import Definition
from flowledger.workflows.authoring.metadata import Metadata
from flowledger.workflows.errors import (
    ConflictError,
    CorruptRecordError,
    InvalidInputError,
    ResumeBlockedError,
    UnknownDefinitionError,
)
from flowledger.workflows.records.inputs import canonical_json
from flowledger.workflows.records.pending import Pending, pending_key
from flowledger.workflows.records.registry import RunPage
from flowledger.workflows.records.run import (
    DEFAULT_RUN_PAGE_SIZE,
    MAX_RUN_PAGE_SIZE,
    InputReference,
    Run,
    RunStatus,
)
from flowledger.workflows.runtime.ownership import OwnerReader, owner_reader
from flowledger.workflows.runtime.resumption import assess_stored, prepare_resume
from flowledger.workflows.runtime.session import WorkflowSession

from .arguments import ArgumentField, canonical_uuid, decode_arguments, new_uuid, parse_id
from .errors import PrepareRunIntegrityError, ToolError, quote, translate
from .queued import QUEUED, queued_list_result
from .results import (
    cancel_result,
    definitions_result,
    history_result,
    run_result,
)

__all__ = [
    "MAX_CANCEL_REASON_BYTES",
    "MAX_DEFINITIONS",
    "MAX_HISTORY_LIMIT",
    "MUTATING_TOOLS",
    "READ_ONLY_TOOLS",
    "TOOL_NAMES",
    "CancelIntentPort",
    "CatalogPort",
    "InputsPort",
    "PendingPort",
    "RegistryPort",
    "StartTicketPort",
    "SupervisorPort",
    "ToolInfo",
    "WorkflowTools",
]

MAX_CANCEL_REASON_BYTES: Final = 512
MAX_DEFINITIONS: Final = 100
MAX_HISTORY_LIMIT: Final = 100
DEFAULT_START_TIMEOUT: Final = 30.0
DEFAULT_CANCEL_REASON: Final = "cancel requested"

TOOL_NAMES: Final = (
    "workflow_definition_list",
    "workflow_run_start",
    "workflow_run_get",
    "workflow_run_list",
    "workflow_run_resume",
    "workflow_run_cancel",
    "workflow_run_history",
)
MUTATING_TOOLS: Final = frozenset(
    {"workflow_run_start", "workflow_run_resume", "workflow_run_cancel"}
)
READ_ONLY_TOOLS: Final = frozenset(TOOL_NAMES) - MUTATING_TOOLS

# The order §7.3 step 9 checks the fields a prepare_run hook must not change.
_PROTECTED: Final = (
    "session_id",
    "tool_execution_id",
    "definition_name",
    "definition_version",
    "id",
    "graph_run_id",
    "parent_run_id",
    "input",
    "status",
    "status_summary",
    "cancel_requested",
    "checkpoint_revision",
    "activity_cursor",
    "ledger_locator",
    "artifacts",
    "created_at",
    "updated_at",
    "revision",
    "forked_from",  # beyond §7.3: a fork's origin (`workflows.records.forks`) is identity too
    "scheduled_by",  # likewise the schedule firing that started a run
    "trace_parent",  # and the trace a run's segments continue (set when the record is created)
)


# -- the ports the bundle needs ------------------------------------------------------------------


class PendingPort(Protocol):
    async def get(self, session_id: str, run_id: str) -> Pending | None: ...


class CatalogPort(Protocol):
    def resolve(self, name: str, version: str) -> Definition: ...

    def list(self) -> Sequence[Metadata]: ...


class RegistryPort(Protocol):
    async def create(self, run: Run) -> Run: ...

    async def get(self, session_id: str, run_id: str) -> Run: ...

    async def compare_and_swap(self, expected_revision: int, next: Run) -> Run: ...

    async def list(self, session_id: str, *, after: str = "", limit: int = 0) -> RunPage: ...

    async def list_newest(
        self,
        session_id: str,
        *,
        status: str = "",
        definition: str = "",
        run_id_prefix: str = "",
        cursor: str = "",
        limit: int = 0,
    ) -> RunPage: ...


class InputsPort(Protocol):
    async def put(self, session_id: str, canonical: bytes) -> InputReference: ...


class StartTicketPort(Protocol):
    async def wait(self) -> None: ...


class CancelIntentPort(Protocol):
    """A supervisor that can say which of concurrent cancels asked first (`Supervisor`
    and `FrontDoor` can): it records the run's durable cancellation intent and answers
    whether this call recorded it. Without it every cancel of a run that is not yet
    cancelled reports ``idempotent: false``."""

    async def request_cancel(self, run_id: str) -> bool: ...


class SupervisorPort(Protocol):
    """The session-owned runtime: start (asynchronous, with a durable seed
    acknowledgement), resume (synchronous), cancel and projected history."""

    async def start(self, run_id: str) -> StartTicketPort: ...

    async def resume(self, run_id: str, payload: bytes | None) -> object: ...

    async def cancel(self, run_id: str, reason: str) -> object: ...

    async def history(
        self,
        run_id: str,
        *,
        after_revision: int = 0,
        after_event_id: str | None = None,
        limit: int = 0,
    ) -> HistoryPage: ...


# -- tool descriptions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolInfo:
    """What a transport needs to publish a tool. `WorkflowTools.infos` builds new
    `ToolInfo` objects on every call, each with its own deep copy of the schema, so
    changing one never changes the bundle or another caller's copy."""

    name: str
    description: str
    schema: dict[str, Any]
    mutating: bool

    def schema_copy(self) -> dict[str, Any]:
        """A fresh deep copy of ``schema``."""
        return copy.deepcopy(self.schema)


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    schema: Mapping[str, Any]
    fields: tuple[ArgumentField, ...]


_STRING: Final = {"type": "string"}
_LIMIT: Final = {"type": "integer", "minimum": 1, "maximum": 100}

_TOOLS: Final = (
    _Tool(
        "workflow_definition_list",
        "List the registered workflow definitions: name, version, description, input and "
        "resume schemas, and on_error (what a task error does). Takes no arguments.",
        {"type": "object", "additionalProperties": False},
        (),
    ),
    _Tool(
        "workflow_run_start",
        "Start a workflow run. The input is validated against the definition's input schema "
        "and stored; returns once the run's first checkpoint is durable, without waiting "
        "for the run to finish.",
        {
            "type": "object",
            "properties": {
                "definition_name": _STRING,
                "definition_version": _STRING,
                "input": {"type": "object"},
                "parent_run_id": _STRING,
            },
            "required": ["definition_name", "definition_version", "input"],
            "additionalProperties": False,
        },
        (
            ArgumentField("definition_name", "string", required=True),
            ArgumentField("definition_version", "string", required=True),
            ArgumentField("input", "object", required=True),
            ArgumentField("parent_run_id", "string"),
        ),
    ),
    _Tool(
        "workflow_run_get",
        "Get one workflow run by run_id: status, summary, revisions, timestamps, "
        "resume_readiness, and for an interrupted run pending: a request (info and the "
        "resume schema to answer) or an error (resume without payload retries it).",
        {
            "type": "object",
            "properties": {"run_id": _STRING},
            "required": ["run_id"],
            "additionalProperties": False,
        },
        (ArgumentField("run_id", "string", required=True),),
    ),
    _Tool(
        "workflow_run_list",
        "List runs by run ID, limit per page (1..100, default 50); a page's next as "
        "after reads on. order newest: newest first, by status (or queued) and definition; "
        "run_id_prefix: IDs starting with it. Filtered pages may be short.",
        {
            "type": "object",
            "properties": {
                "after": _STRING,
                "limit": _LIMIT,
                "order": {"type": "string", "enum": ["run_id", "newest"]},
                "status": _STRING,
                "definition": _STRING,
                "run_id_prefix": _STRING,
            },
            "additionalProperties": False,
        },
        (
            ArgumentField("after", "string"),
            ArgumentField("limit", "integer"),
            ArgumentField("order", "string"),
            ArgumentField("status", "string"),
            ArgumentField("definition", "string"),
            ArgumentField("run_id_prefix", "string"),
        ),
    ),
    _Tool(
        "workflow_run_resume",
        "Resume an interrupted run: a request pause needs resume matching "
        "pending.resume_schema; an error pause takes none (a retry); a timer pause "
        "wakes by itself at pending.wake_at. Refused, changing nothing, when blocked. "
        "Returns once it pauses again or ends.",
        {
            "type": "object",
            "properties": {"run_id": _STRING, "resume": {"type": "object"}},
            "required": ["run_id"],
            "additionalProperties": False,
        },
        (
            ArgumentField("run_id", "string", required=True),
            ArgumentField("resume", "object"),
        ),
    ),
    _Tool(
        "workflow_run_cancel",
        "Cancel a workflow run, with an optional reason of at most 512 bytes. An already "
        "cancelled run gives idempotent true; a completed or failed run cannot be cancelled.",
        {
            "type": "object",
            "properties": {"run_id": _STRING, "reason": {"type": "string", "maxLength": 512}},
            "required": ["run_id"],
            "additionalProperties": False,
        },
        (ArgumentField("run_id", "string", required=True), ArgumentField("reason", "string")),
    ),
    _Tool(
        "workflow_run_history",
        "Read a page of a run's activity history (limit 1..100, default 50). To continue, "
        "pass next_revision as after_revision and next_event_id, if present, as "
        "after_event_id.",
        {
            "type": "object",
            "properties": {
                "run_id": _STRING,
                "after_revision": {"type": "integer", "minimum": 0},
                "after_event_id": _STRING,
                "limit": _LIMIT,
            },
            "required": ["run_id"],
            "additionalProperties": False,
        },
        (
            ArgumentField("run_id", "string", required=True),
            ArgumentField("after_revision", "integer", unsigned=True),
            ArgumentField("after_event_id", "string"),
            ArgumentField("limit", "integer"),
        ),
    ),
)
_BY_NAME: Final = {tool.name: tool for tool in _TOOLS}


# -- helpers -------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _as_utc(moment: object) -> datetime:
    """``moment`` as an aware datetime whose tzinfo is `datetime.UTC` (a naive one is
    taken to be UTC already)."""
    if not isinstance(moment, datetime):
        raise TypeError(f"now() returned {type(moment).__name__}, not a datetime")
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _same(before: object, after: object) -> bool:
    if type(before) is not type(after):
        return False
    if isinstance(before, datetime) and isinstance(after, datetime):
        return before == after and before.tzinfo is after.tzinfo
    return before == after


def _protected_change(before: Run, after: object) -> str:
    """The first protected field that differs (§7.3 step 9), ``run_metadata`` if the
    records differ otherwise, or ``""`` if only the artifact namespace changed."""
    if not isinstance(after, Run):
        return "run_metadata"
    for name in _PROTECTED:
        if not _same(getattr(before, name), getattr(after, name)):
            return name
    return ""


def _require(value: object, *methods: str) -> bool:
    return all(callable(getattr(value, method, None)) for method in methods)


def _byte_length(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


# -- the bundle ----------------------------------------------------------------------------------


class WorkflowTools:
    """The workflow tool bundle of one session (workflows-spec §7.1).

    ``supervisor`` is the session-owned runtime (`flowledger.workflows.Supervisor`, or
    anything with its ``start``/``resume``/``cancel``/``history``). ``prepare_run`` may
    set the artifact namespace of a new run record before it is created (§7.3 step 9).
    ``start_timeout`` bounds how long `workflow_run_start` waits for the durable seed.

    Construction refuses missing dependencies (`ValueError`) and dependencies without the
    methods the tools call (`TypeError`)."""

    def __init__(
        self,
        session_id: str,
        *,
        catalog: CatalogPort,
        registry: RegistryPort,
        inputs: InputsPort,
        supervisor: SupervisorPort,
        now: Callable[[], datetime] = _utc_now,
        new_id: Callable[[], str] = new_uuid,
        prepare_run: Callable[[Run], Awaitable[Run] | Run] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        pending: PendingPort | None = None,
        owners: OwnerReader | None = None,
    ) -> None:
        if (
            not session_id
            or catalog is None
            or registry is None
            or inputs is None
            or supervisor is None
        ):
            raise ValueError(
                "workflow tools: session, catalog, registry, input store, and supervisor "
                "are required"
            )
        canonical = canonical_uuid(session_id)
        if canonical is None or canonical != session_id:
            raise ValueError("workflow tools: session ID must be a nonzero lowercase UUID")
        if not _require(catalog, "resolve", "list"):
            raise TypeError("workflow tools: the catalog needs resolve and list")
        if not _require(registry, "create", "get", "compare_and_swap", "list"):
            raise TypeError(
                "workflow tools: the run registry needs create, get, compare_and_swap and list"
            )
        if not _require(inputs, "put"):
            raise TypeError("workflow tools: the input store needs put")
        if not _require(supervisor, "resume", "cancel"):
            raise TypeError("workflow tools: the supervisor needs resume and cancel")
        if not _require(supervisor, "start"):
            raise TypeError(
                "workflow tools: the supervisor must be a session-owned start controller "
                "(it has no start)"
            )
        if not _require(supervisor, "history"):
            raise TypeError(
                "workflow tools: the supervisor must be a projected history controller "
                "(it has no history)"
            )
        if not callable(now) or not callable(new_id):
            raise TypeError("workflow tools: now and new_id must be callable")
        if prepare_run is not None and not callable(prepare_run):
            raise TypeError("workflow tools: prepare_run must be callable or None")
        if (
            isinstance(start_timeout, bool)
            or not isinstance(start_timeout, int | float)
            or not math.isfinite(start_timeout)
            or start_timeout <= 0
        ):
            raise ValueError("workflow tools: start_timeout must be a positive number of seconds")
        self._session_id = session_id
        self._catalog = catalog
        self._registry = registry
        self._inputs = inputs
        self._supervisor = supervisor
        self._intent: CancelIntentPort | None = (
            cast("CancelIntentPort", supervisor) if _require(supervisor, "request_cancel") else None
        )
        self._now = now
        self._new_id = new_id
        self._prepare_run = prepare_run
        self._start_timeout = float(start_timeout)
        self._pending = pending
        self._owners = owners  # `workflow_run_get`'s ``owner`` field (omitted without it)
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "workflow_definition_list": self._definition_list,
            "workflow_run_start": self._run_start,
            "workflow_run_get": self._run_get,
            "workflow_run_list": self._run_list,
            "workflow_run_resume": self._run_resume,
            "workflow_run_cancel": self._run_cancel,
            "workflow_run_history": self._run_history,
        }

    @classmethod
    def for_session(
        cls,
        session: WorkflowSession,
        *,
        supervisor: SupervisorPort | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        **options: Any,
    ) -> WorkflowTools:
        """The bundle of ``session``, with everything the session keeps wired in (its
        pending records, the owner status of its runs, its clock); ``supervisor`` defaults
        to the session's own (pass a front door or a read-only control instead)."""
        return cls(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            inputs=session.inputs,
            supervisor=session.supervisor if supervisor is None else supervisor,
            start_timeout=start_timeout,
            pending=session.pending,
            owners=owner_reader(session.store.leases),
            **{"now": session.clock.now, **options},
        )

    @property
    def session_id(self) -> str:
        return self._session_id

    # -- discovery -------------------------------------------------------------------------

    def infos(self) -> builtins.list[ToolInfo]:
        """The tools in the §7.1 order, described afresh on every call."""
        return [self._info(tool) for tool in _TOOLS]

    def info(self, name: str) -> ToolInfo:
        """One tool's description; `ToolError` for an unknown name."""
        tool = _BY_NAME.get(name) if isinstance(name, str) else None
        if tool is None:
            raise ToolError(f"unknown tool {quote(name)}")
        return self._info(tool)

    @staticmethod
    def _info(tool: _Tool) -> ToolInfo:
        return ToolInfo(
            name=tool.name,
            description=tool.description,
            schema=copy.deepcopy(dict(tool.schema)),
            mutating=tool.name in MUTATING_TOOLS,
        )

    # -- calling ---------------------------------------------------------------------------

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        """Run tool ``name`` with ``arguments`` (JSON text, a mapping, or ``None`` for
        ``{}``); return its JSON result. Every failure is a `ToolError`."""
        tool = _BY_NAME.get(name) if isinstance(name, str) else None
        if tool is None:
            raise ToolError(f"unknown tool {quote(name)}")
        document = decode_arguments(arguments, tool.fields)
        try:
            return await self._handlers[tool.name](document)
        except ToolError:
            raise
        except Exception as exc:  # a dependency failed somewhere we did not expect
            raise translate(exc, action=tool.name) from exc

    # -- shared steps ----------------------------------------------------------------------

    async def _get(self, run_id: str, *, action: str, subject: str = "run") -> Run:
        try:
            return await self._registry.get(self._session_id, run_id)
        except Exception as exc:
            raise translate(exc, action=action, run_id=run_id, subject=subject) from exc

    def _resolve(self, name: str, version: str, *, action: str) -> Definition:
        try:
            return self._catalog.resolve(name, version)
        except UnknownDefinitionError as exc:
            raise ToolError(
                f"{action}: unknown workflow definition {quote(name)} version {quote(version)}",
                cause=exc,
            ) from exc
        except Exception as exc:
            raise translate(exc, action=action) from exc

    def _canonical(self, value: dict[str, Any], field: str) -> bytes:
        try:
            return canonical_json(value, field=field)
        except InvalidInputError as exc:
            raise translate(exc, action=f"validate {field}") from exc

    def _mint(self, what: str) -> str:
        try:
            value: object = self._new_id()
        except Exception as exc:
            raise ToolError(f"mint {what}: the ID source failed", cause=exc) from exc
        if isinstance(value, uuid.UUID):
            value = str(value)
        minted = canonical_uuid(value)
        if minted is None:
            raise ToolError(f"mint {what}: the ID source returned a zero or malformed UUID")
        return minted

    # -- workflow_definition_list (§7.9) ---------------------------------------------------

    async def _definition_list(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            metadata = builtins.list(self._catalog.list())
            policies = {
                (item.name, item.version): self._catalog.resolve(item.name, item.version).on_error
                for item in metadata[:MAX_DEFINITIONS]
            }
        except Exception as exc:
            raise translate(exc, action="list definitions") from exc
        return definitions_result(metadata, limit=MAX_DEFINITIONS, on_error=policies)

    # -- workflow_run_start (§7.3) ---------------------------------------------------------

    async def _run_start(self, arguments: dict[str, Any]) -> dict[str, Any]:
        run = await self.start_run(
            arguments["definition_name"],
            arguments["definition_version"],
            arguments["input"],
            parent_run_id=arguments.get("parent_run_id", ""),
        )
        return await self._with_queue(run, run_result(run))

    async def start_run(
        self,
        definition_name: str,
        definition_version: str,
        input: dict[str, Any],
        *,
        parent_run_id: str = "",
    ) -> Run:
        """``workflow_run_start`` for Python callers: the created run once its first
        checkpoint is observed. Every failure is a `ToolError`."""
        action = "start run"
        definition = self._resolve(definition_name, definition_version, action=action)
        canonical = self._canonical(input, "input")
        try:
            definition.validate_input(canonical)  # the token is discarded (step 4)
        except Exception as exc:
            raise translate(exc, action="validate input") from exc
        parent_text = parent_run_id
        parent: str | None = None
        if parent_text:
            parent = parse_id("parent_run_id", parent_text)
            await self._get(parent, action=action, subject="parent run")
        try:
            reference = await self._inputs.put(self._session_id, canonical)
        except Exception as exc:
            raise translate(exc, action="store input") from exc
        run_id = self._mint("workflow run ID")
        graph_run_id = self._mint("graph run ID")
        execution_id = self._mint("execution ID")
        try:
            moment = _as_utc(self._now())
        except Exception as exc:
            raise translate(exc, action="read the clock") from exc
        metadata = definition.metadata()
        record = Run(
            session_id=self._session_id,
            tool_execution_id=execution_id,
            definition_name=metadata.name,
            definition_version=metadata.version,
            id=run_id,
            graph_run_id=graph_run_id,
            input=reference,
            ledger_locator=f"flow/runs/{graph_run_id}",
            created_at=moment,
            updated_at=moment,
            status=RunStatus.PENDING,
            parent_run_id=parent,
            artifact_session_id=self._session_id,
            artifact_run_id=run_id,
        )
        if self._prepare_run is not None:
            record = await self._prepare(record)
        try:
            await self._registry.create(record)
        except Exception as exc:
            raise translate(exc, action=action, run_id=run_id) from exc
        keep = getattr(self._inputs, "keep", None)  # an `InputStore` has it; a fake need not
        try:  # a prune deleting this input meanwhile must not leave the run without it
            if keep is not None:
                await keep(self._session_id, reference, canonical)
        except Exception as exc:
            raise translate(exc, action="store input", run_id=run_id) from exc
        try:
            ticket: object = await self._supervisor.start(run_id)
        except Exception as exc:
            raise translate(exc, action=action, run_id=run_id) from exc
        wait = getattr(ticket, "wait", None)
        if ticket is None or not callable(wait):
            raise ToolError(f"{action}: run {run_id}: invalid result channels")
        deadline = asyncio.timeout(self._start_timeout)
        try:
            async with deadline:
                await wait()
        except Exception as exc:
            if deadline.expired():
                raise ToolError(
                    f"run {run_id} was created, but its first checkpoint was not observed "
                    f"within {self._start_timeout:g}s; check it with workflow_run_get",
                    cause=exc,
                ) from exc
            raise translate(exc, action=action, run_id=run_id) from exc
        return await self._get(run_id, action=action)

    async def _prepare(self, record: Run) -> Run:
        assert self._prepare_run is not None
        try:
            prepared: object = self._prepare_run(dataclasses.replace(record))
            if inspect.isawaitable(prepared):
                prepared = await prepared
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"prepare_run failed ({type(exc).__name__})", cause=exc) from exc
        field = _protected_change(record, prepared)
        if field:
            raise PrepareRunIntegrityError(field)
        assert isinstance(prepared, Run)
        return prepared

    # -- workflow_run_get (§7.4) -----------------------------------------------------------

    async def _run_get(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.describe_run(arguments["run_id"])

    async def describe_run(self, run_id: str) -> dict[str, Any]:
        """``workflow_run_get`` for Python callers. Every failure is a `ToolError`."""
        run_id = parse_id("run_id", run_id)
        return await self._described(await self._get(run_id, action="get run"), "get run")

    async def _described(self, run: Run, action: str) -> dict[str, Any]:
        """``run_result`` with what the owning session may know beyond it: the run's resume
        readiness and, for a stopped run, what it waits for (or the error that failed it)."""
        result = run_result(run)
        try:
            definition: Definition | None = self._catalog.resolve(
                run.definition_name, run.definition_version
            )
        except UnknownDefinitionError:
            definition = None
        try:
            readiness = await assess_stored(definition, run)
            pending = None
            if self._pending is not None and run.status in (
                RunStatus.INTERRUPTED,
                RunStatus.FAILED,
            ):
                pending = await self._pending.get(self._session_id, run.id)
                if pending is None and run.status is RunStatus.INTERRUPTED:
                    # The owner stores it before it records the pause: gone, it is damage.
                    raise CorruptRecordError(
                        pending_key(self._session_id, run.id),
                        "the run is interrupted, but what it waits for is not stored",
                    )
        except Exception as exc:
            raise translate(exc, action=action, run_id=run.id) from exc
        result["resume_readiness"] = readiness.to_json()
        if run.status is RunStatus.CANCELLED and definition is not None:
            reason = await self._cancel_reason(definition, run)
            if reason:
                result["cancel_reason"] = reason
        if pending is not None and pending.checkpoint_revision == run.checkpoint_revision:
            if run.status is RunStatus.INTERRUPTED and not pending.failed:
                result["pending"] = pending.to_json()
            elif run.status is RunStatus.FAILED and pending.failed:
                result["error"] = pending.to_json()["error"]
                # every failed vertex (parallel branches can fail in the same step)
                result["errors"] = [item.to_json() for item in pending.errored]
        if self._owners is not None:
            try:
                owner = await self._owners(run)
            except Exception as exc:
                raise translate(exc, action="get run owner") from exc
            if owner is not None:
                result["owner"] = owner
        return await self._with_queue(run, result)

    async def _with_queue(self, run: Run, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with ``queued`` (scope, position) when the run waits for a slot of a
        ``max_running`` limit (`flowledger.workflows.admission`)."""
        kv = getattr(self._registry, "kv", None)
        if run.status is RunStatus.PENDING and isinstance(kv, storage.KV):
            try:
                queued = await queued_at(kv, run)
            except Exception as exc:
                raise translate(exc, action="get run queue position") from exc
            if queued is not None:
                result["queued"] = queued.to_json()
        return result

    async def _cancel_reason(self, definition: Definition, run: Run) -> str:
        """The reason a cancelled run's canceller gave (Flow keeps it in the cancelled
        checkpoint); ``""`` for a run cancelled before its first checkpoint, which Flow
        never saw."""
        try:
            return (await definition.get(run.graph_run_id)).run.cancel_reason
        except flow.CheckpointNotFoundError:
            return ""
        except Exception as exc:
            raise translate(exc, action="get run", run_id=run.id) from exc

    # -- workflow_run_list (§7.5) ----------------------------------------------------------

    async def _run_list(self, arguments: dict[str, Any]) -> dict[str, Any]:
        after = arguments.get("after", "")
        limit = arguments.get("limit", 0)
        # The registry's own rules, checked first so the message can say what to send.
        if limit != 0 and not 1 <= limit <= MAX_RUN_PAGE_SIZE:
            raise ToolError(
                f"list runs: limit must be in 1..{MAX_RUN_PAGE_SIZE} "
                f"(0 or absent means {DEFAULT_RUN_PAGE_SIZE})"
            )
        order = arguments.get("order", "run_id")
        status = arguments.get("status", "")
        definition = arguments.get("definition", "")
        prefix = arguments.get("run_id_prefix", "")
        if order not in ("run_id", "newest"):
            raise ToolError("list runs: order must be run_id or newest")
        statuses = [str(s) for s in RunStatus] + [QUEUED]
        if status and status not in statuses:
            raise ToolError("list runs: status must be one of " + ", ".join(statuses))
        kv = getattr(self._registry, "kv", None)
        kv = kv if isinstance(kv, storage.KV) else None
        if order == "newest" or status or definition or prefix:
            try:
                page = await self._registry.list_newest(
                    self._session_id,
                    status=str(RunStatus.PENDING) if status == QUEUED else status,
                    definition=definition,
                    run_id_prefix=prefix.strip().lower(),
                    cursor=after,
                    limit=limit,
                )
            except ValueError as exc:
                raise ToolError(
                    "list runs: after must be empty or the next of a previous page"
                ) from exc
            except Exception as exc:
                raise translate(exc, action="list runs") from exc
            return await queued_list_result(kv, page, only_queued=status == QUEUED)
        if after and canonical_uuid(after) != after:
            raise ToolError(
                "list runs: after must be empty or a run ID (the next of a previous page)"
            )
        try:
            page = await self._registry.list(self._session_id, after=after, limit=limit)
        except Exception as exc:
            raise translate(exc, action="list runs") from exc
        return await queued_list_result(kv, page)

    # -- workflow_run_resume (§7.6) --------------------------------------------------------

    async def _run_resume(self, arguments: dict[str, Any]) -> dict[str, Any]:
        run = await self.resume_run(arguments["run_id"], arguments.get("resume"))
        return await self._described(run, "resume run")

    async def resume_run(self, run_id: str, payload: dict[str, Any] | None) -> Run:
        """``workflow_run_resume`` for Python callers: the run once the resume is accepted
        (``payload`` ``None``: resume without one). Every failure is a `ToolError`."""
        action = "resume run"
        run_id = parse_id("run_id", run_id)
        run = await self._get(run_id, action=action)
        if run.status is not RunStatus.INTERRUPTED:
            conflict = ConflictError(
                self._session_id, run_id, "resume requires interrupted run", actual=run.revision
            )
            raise ToolError(
                f"{action}: resume requires interrupted run; run {run_id} is {run.status}",
                cause=conflict,
            )
        definition = self._resolve(run.definition_name, run.definition_version, action=action)
        canonical = None if payload is None else self._canonical(payload, "resume")
        try:
            # Checked here too, so a refused resume never reaches the supervisor. Anything
            # else (a checkpoint that cannot be read) is the supervisor's to act on. The
            # environment (a deployed run's sources) is the owner's to check, once, under
            # the run's lock.
            await prepare_resume(definition, run, canonical, precheck=True)
        except InvalidInputError as exc:
            raise translate(exc, action="validate resume") from exc
        except ResumeBlockedError as exc:
            raise translate(exc, action=action, run_id=run_id) from exc
        except Exception:
            pass
        try:
            await self._supervisor.resume(run_id, canonical)
        except InvalidInputError as exc:
            raise translate(exc, action="validate resume") from exc
        except Exception as exc:
            raise translate(exc, action=action, run_id=run_id) from exc
        return await self._get(run_id, action=action)

    # -- workflow_run_cancel (§7.7) --------------------------------------------------------

    async def _run_cancel(self, arguments: dict[str, Any]) -> dict[str, Any]:
        action = "cancel run"
        run_id = parse_id("run_id", arguments["run_id"])
        raw_reason: str = arguments.get("reason", "")
        size = _byte_length(raw_reason)
        if size > MAX_CANCEL_REASON_BYTES:
            raise ToolError(
                f"{action}: reason is {size} bytes; the limit is {MAX_CANCEL_REASON_BYTES}"
            )
        run = await self._get(run_id, action=action)
        if run.status is RunStatus.CANCELLED:
            return cancel_result(run_id, run.status, idempotent=True)
        if run.status in (RunStatus.COMPLETED, RunStatus.FAILED):
            conflict = ConflictError(
                self._session_id,
                run_id,
                "terminal run cannot be cancelled",
                actual=run.revision,
            )
            raise ToolError(
                f"{action}: terminal run cannot be cancelled; run {run_id} is {run.status}",
                cause=conflict,
            )
        reason = raw_reason.strip() or DEFAULT_CANCEL_REASON
        try:
            # Of concurrent cancels exactly one records the intent: it is the one that is
            # not idempotent (workflows.records.intent).
            first = True if self._intent is None else await self._intent.request_cancel(run_id)
            await self._supervisor.cancel(run_id, reason)
        except Exception as exc:
            raise translate(exc, action=action, run_id=run_id) from exc
        current = await self._get(run_id, action=action)
        return cancel_result(run_id, current.status, idempotent=not first)

    # -- workflow_run_history (§7.8) -------------------------------------------------------

    async def _run_history(self, arguments: dict[str, Any]) -> dict[str, Any]:
        action = "read history"
        run_id = parse_id("run_id", arguments["run_id"])
        after_revision: int = arguments.get("after_revision", 0)
        limit: int = arguments.get("limit", 0)
        if limit != 0 and not 1 <= limit <= MAX_HISTORY_LIMIT:
            raise ToolError(
                f"{action}: limit must be in 1..{MAX_HISTORY_LIMIT} (0 or absent means 50)"
            )
        event_text: str = arguments.get("after_event_id", "")
        after_event_id = parse_id("after_event_id", event_text) if event_text else None
        try:
            page = await self._supervisor.history(
                run_id, after_revision=after_revision, after_event_id=after_event_id, limit=limit
            )
        except Exception as exc:
            raise translate(exc, action=action, run_id=run_id) from exc
        return history_result(run_id, page)
