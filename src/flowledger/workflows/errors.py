"""The workflow error families.

Every family is one exception class; concrete errors carry their fields.
`isinstance` answers "is this a conflict?"; a typed error's ``cause`` is kept
for diagnostics (and as ``__cause__``) but never changes its family.
"""

from __future__ import annotations

__all__ = [
    "ActivityValidationError",
    "AdoptionError",
    "ConflictError",
    "CorruptRecordError",
    "DefinitionError",
    "DuplicateDefinitionError",
    "FrontDoorTimeoutError",
    "HistoryCursorError",
    "InvalidForkError",
    "InvalidInputError",
    "InvalidSchemaError",
    "NotFoundError",
    "ReconciliationError",
    "ResumeBlockedError",
    "SessionOwnedError",
    "ShutdownTimeoutError",
    "SupervisorActiveError",
    "SupervisorClosedError",
    "UnknownDefinitionError",
    "WorkflowError",
]


class WorkflowError(Exception):
    """Base class of every workflow error."""


def _cause(cause: BaseException | str | None) -> str:
    if cause is None:
        return ""
    text = str(cause)
    return text or type(cause).__name__


class UnknownDefinitionError(WorkflowError, LookupError):
    def __init__(self, name: str, version: str) -> None:
        self.name = name
        self.version = version
        super().__init__(f"unknown workflow definition: {name}@{version}")


class DuplicateDefinitionError(WorkflowError):
    def __init__(self, name: str, version: str) -> None:
        self.name = name
        self.version = version
        super().__init__(f"duplicate workflow definition: {name}@{version}")


class InvalidSchemaError(WorkflowError, ValueError):
    """A definition's metadata or schema is unusable (``field`` says which)."""

    def __init__(self, field: str, cause: BaseException | str) -> None:
        self.field = field
        self.cause = cause
        super().__init__(f"invalid workflow schema ({field}): {_cause(cause)}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class DefinitionError(WorkflowError):
    """The definition is wrong, not the caller's document: an input (or resume payload)
    that passed the definition's schema could not be decoded. ``field`` is ``input`` or
    ``resume``; ``path`` names the state field (``count``, ``items[0].name``) when the
    decoder said which, else ``""``; ``detail`` is the decoder's reason (for logs: a
    custom decoder's message may quote the document)."""

    def __init__(
        self, name: str, version: str, field: str, path: str, cause: BaseException | str
    ) -> None:
        self.name = name
        self.version = version
        self.field = field
        self.path = path
        self.cause = cause
        self.detail = _cause(cause)
        where = f" at state field {path!r}" if path else ""
        super().__init__(
            f"definition {name}@{version} is broken: its {field} decoder refused a document "
            f"that passed its {field} schema{where}: {self.detail}"
        )
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class InvalidInputError(WorkflowError, ValueError):
    """An input or resume document was refused (``field`` is ``input`` or ``resume``)."""

    def __init__(self, field: str, cause: BaseException | str) -> None:
        self.field = field
        self.cause = cause
        super().__init__(f"invalid workflow {field}: {_cause(cause)}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class InvalidForkError(WorkflowError, ValueError):
    """A fork was refused before anything was written. ``field`` is what was wrong:
    ``revision`` (not a revision of the origin), ``patch`` (``state_field`` names the
    top-level state field, empty when the patch as a whole is wrong) or ``definition``
    (another definition or version than the origin's, or a registered graph that is
    not the one the origin was written by)."""

    def __init__(self, field: str, cause: BaseException | str, *, state_field: str = "") -> None:
        self.field = field
        self.cause = cause
        self.state_field = state_field
        super().__init__(f"invalid fork {field}: {_cause(cause)}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class NotFoundError(WorkflowError, LookupError):
    """No such run (or input) in this session. Other sessions' records are not found."""

    def __init__(
        self, kind: str, session_id: str, run_id: str | None = None, digest: str | None = None
    ) -> None:
        self.kind = kind
        self.session_id = session_id
        self.run_id = run_id
        self.digest = digest
        what = f"run {run_id}" if kind == "run" else f"input {digest}"
        super().__init__(f"workflow record not found: {what} in session {session_id}")


class HistoryCursorError(WorkflowError, ValueError):
    """A history cursor names an event that is not an activity of the named revision.

    A cursor a page returned always matches (the journal only grows), so this is a cursor
    of another run, or one that was made up; skipping the revision instead would silently
    drop its activities."""

    def __init__(self, after_revision: int, after_event_id: str) -> None:
        self.after_revision = after_revision
        self.after_event_id = after_event_id
        super().__init__(
            f"after_event_id {after_event_id} is not an activity of revision {after_revision}"
        )


class ConflictError(WorkflowError):
    """A compare-and-swap or lifecycle rule refused a change; nothing was written."""

    def __init__(
        self,
        session_id: str,
        run_id: str | None,
        reason: str,
        *,
        expected: int = 0,
        actual: int = 0,
    ) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.reason = reason
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"workflow record conflict for run {run_id}: {reason} "
            f"(expected revision {expected}, actual {actual})"
        )


class CorruptRecordError(WorkflowError):
    """A stored record cannot be trusted (bad JSON, unknown fields, failed verification)."""

    def __init__(self, key: str, cause: BaseException | str) -> None:
        self.key = key
        self.cause = cause
        super().__init__(f"corrupt workflow record {key}: {_cause(cause)}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class ResumeBlockedError(WorkflowError):
    """A resume was refused because the run cannot be continued as things are (its
    readiness is ``blocked``). Nothing was written: the run is still interrupted at the
    same checkpoint and the payload was not consumed. ``readiness`` is a
    `flowledger.workflows.authoring.readiness.ResumeReadiness` with the diagnostics."""

    def __init__(self, run_id: str, readiness: object, explanation: str) -> None:
        self.run_id = run_id
        self.readiness = readiness
        self.readiness_text = explanation
        super().__init__(f"run {run_id} cannot be resumed now: {explanation}")


class SupervisorActiveError(WorkflowError):
    def __init__(self) -> None:
        super().__init__("workflow supervisor already active")


class SupervisorClosedError(WorkflowError):
    def __init__(self) -> None:
        super().__init__("workflow supervisor closed")


class ShutdownTimeoutError(WorkflowError, TimeoutError):
    def __init__(self) -> None:
        super().__init__("workflow supervisor shutdown timed out")


class SessionOwnedError(WorkflowError):
    def __init__(self, session_id: str, holder_epoch: int) -> None:
        self.session_id = session_id
        self.holder_epoch = holder_epoch
        super().__init__(
            f"workflow session already owned: {session_id} (holder epoch {holder_epoch})"
        )


class AdoptionError(WorkflowError):
    """Names the run and the operation only; the cause is attached, not printed."""

    def __init__(self, run_id: str, op: str, cause: BaseException | str | None = None) -> None:
        self.run_id = run_id
        self.op = op
        self.cause = cause
        super().__init__(f"workflow adoption failed for run {run_id}: {op}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class ActivityValidationError(WorkflowError, ValueError):
    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"workflow activity validation failed: {field}: {rule}")


class ReconciliationError(WorkflowError):
    def __init__(self, run_id: str, op: str, cause: BaseException | str | None = None) -> None:
        self.run_id = run_id
        self.op = op
        self.cause = cause
        super().__init__(f"workflow activity reconciliation failed for run {run_id}: {op}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


class FrontDoorTimeoutError(WorkflowError, TimeoutError):
    """A front door wrote a durable request (a pending run, a resume or cancel request) but
    did not see it acted on in time. ``picked_up`` says whether a worker had taken it on;
    the request itself stays durable (a resume request that nobody took is withdrawn)."""

    def __init__(self, action: str, run_id: str, seconds: float, *, picked_up: bool) -> None:
        self.action = action
        self.run_id = run_id
        self.seconds = seconds
        self.picked_up = picked_up
        super().__init__(self.describe())

    def describe(self) -> str:
        """The message a tool shows (it names the public run ID only)."""
        if self.picked_up:
            return (
                f"a worker took on the {self.action} of run {self.run_id}, but it did not "
                f"finish within {self.seconds:g} s; check it with workflow_run_get"
            )
        verb = {"start": "started", "resume": "resumed", "cancel": "cancelled"}.get(
            self.action, f"acted on ({self.action})"
        )
        return (
            f"no worker {verb} run {self.run_id} within {self.seconds:g} s; is a "
            "`flowledger worker` running against this database?"
        )
