"""Tool errors: one model-facing exception family for every failed tool call.

A `ToolError` message starts with ``workflow tools: ``, says what is wrong and where,
and never carries private data: no input or resume bytes, no graph state, no session
ID, graph run ID or ledger locator, and no storage key (keys embed the session ID).
Messages are therefore written here from the *kind* of failure, never copied from the
underlying exception; the typed workflow error that caused it stays available as
``cause`` (and ``__cause__``) for logs and for code that wants to branch on it.

An input or resume document that fails its schema is the exception the caller can act
on: every violation is named with its JSON path and reason (``invalid input:
$.limit: 0 is less than the minimum 1; $.extra: additional property not allowed``).
Paths name the caller's own keys and reasons quote its numbers, never its strings.
"""

from __future__ import annotations

from typing import Final

from flowledger.workflows.authoring.definition import (
    FOREIGN_TOKEN,
    NOT_REGISTERED,
    RESUME_NOT_SUPPORTED,
)
from flowledger.workflows.authoring.schema import (
    BoundedJSONError,
    SchemaValidationError,
    describe_violations,
)
from flowledger.workflows.errors import (
    AdoptionError,
    ConflictError,
    CorruptRecordError,
    DefinitionError,
    FrontDoorTimeoutError,
    HistoryCursorError,
    InvalidForkError,
    InvalidInputError,
    NotFoundError,
    ReconciliationError,
    ResumeBlockedError,
    SessionOwnedError,
    ShutdownTimeoutError,
    SupervisorClosedError,
    UnknownDefinitionError,
)
from flowledger.workflows.records.inputs import (
    MAX_INPUT_BYTES,
    MAX_INPUT_DEPTH,
    MAX_INPUT_PROPERTIES,
)
from flowledger.workflows.runtime.resumption import (
    NO_PAYLOAD_FOR_ERROR,
    PARKED_ON_TIMER,
    PAYLOAD_REQUIRED,
)

__all__ = [
    "PREFIX",
    "PrepareRunIntegrityError",
    "ToolError",
    "invalid_arguments",
    "quote",
    "translate",
]

PREFIX: Final = "workflow tools: "

_MAX_QUOTED: Final = 64
_MAX_PATH: Final = 128
_NOT_ACCEPTING: Final = "supervisor is not accepting work"


class ToolError(Exception):
    """A failed tool call. ``str(error)`` is safe to show to a model; ``cause`` is the
    typed error behind it (also ``__cause__``), or ``None``."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        if not message.startswith(PREFIX):
            message = PREFIX + message
        super().__init__(message)
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause

    @property
    def message(self) -> str:
        return str(self.args[0])


class PrepareRunIntegrityError(ToolError):
    """The ``prepare_run`` hook changed a protected field of the pending run record
    (workflows-spec §7.3 step 9). ``field`` names the first one, in the spec's order, or
    is ``run_metadata`` when the records differ otherwise."""

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"prepare_run changed protected run field {field!r}")


def quote(text: object, limit: int = _MAX_QUOTED) -> str:
    """A caller-supplied name for an error message: ``repr`` of at most ``limit``
    characters of it (longer text is cut and marked)."""
    if not isinstance(text, str):
        return f"<{type(text).__name__}>"
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)


def invalid_arguments(reason: str, *, cause: BaseException | None = None) -> ToolError:
    """``workflow tools: invalid arguments: <reason>``."""
    return ToolError(f"invalid arguments: {reason}", cause=cause)


def _bounded_path(path: str) -> str:
    return path if len(path.encode()) <= _MAX_PATH else "a nested value"


def _input_reason(error: InvalidInputError) -> str:
    """Why an input or resume document was refused, without quoting any of it."""
    field = error.field if error.field in ("input", "resume") else "document"
    cause = error.cause
    if isinstance(cause, SchemaValidationError):
        # Every violation, with its path and reason; reasons never quote the document's
        # strings (see `Violation`), and long paths are not repeated.
        return describe_violations(cause.violations, cause.total, _bounded_path)
    if isinstance(cause, BoundedJSONError):
        return "the document is not one bounded JSON object"
    if not isinstance(cause, str):
        return f"the definition's {field} decoder refused the document"
    if cause in (
        NOT_REGISTERED,
        RESUME_NOT_SUPPORTED,
        FOREIGN_TOKEN,
        PAYLOAD_REQUIRED,
        NO_PAYLOAD_FOR_ERROR,
    ):
        return cause
    if cause.startswith(PARKED_ON_TIMER):  # names only the wake time, never the document
        return cause
    # The refusals of canonical_json; their paths and numbers quote the document.
    if "must be a JSON object" in cause:
        return "must be a JSON object"
    if "double form" in cause:
        return "a number has no exact IEEE 754 double form"
    if "not a finite number" in cause:
        return "a number is not finite"
    if "nesting deeper" in cause:
        return f"nesting is deeper than {MAX_INPUT_DEPTH} levels"
    if "object keys" in cause:
        return f"more than {MAX_INPUT_PROPERTIES} object keys"
    if "the limit is" in cause:
        return f"the canonical document is over {MAX_INPUT_BYTES} bytes"
    if "not valid Unicode" in cause:
        return "a string is not valid Unicode"
    return "the document was refused"


def translate(
    error: BaseException, *, action: str, run_id: str | None = None, subject: str = "run"
) -> ToolError:
    """The `ToolError` for ``error`` raised while doing ``action`` (e.g. ``"resume run"``)
    on ``run_id`` (a public run ID, or ``None``), which is the ``subject`` (``"run"`` or
    ``"parent run"``). The message is built from the error's kind and its non-private
    fields only."""
    if isinstance(error, ToolError):
        return error
    subject = f"{subject} {run_id}" if run_id else f"the {subject}"
    if isinstance(error, FrontDoorTimeoutError):
        message = error.describe()  # names the public run ID only
    elif isinstance(error, DefinitionError):
        # The author's mistake: say so, and which state field; the decoder's own detail
        # may quote the document, so it stays in ``cause`` for logs.
        where = f" at state field {_bounded_path(error.path)}" if error.path else ""
        message = (
            f"{action}: workflow definition {quote(error.name)} version "
            f"{quote(error.version)} is broken (not your {error.field}): its {error.field} "
            f"decoder refused a document that passed its {error.field} schema{where}"
        )
    elif isinstance(error, InvalidForkError):
        # Built from public run IDs, revisions, state field names and the caller's own
        # patch values (`workflows.records.forks`).
        message = f"{action}: {error}"
    elif isinstance(error, InvalidInputError):
        field = "resume" if error.field == "resume" else "input"
        message = f"invalid {field}: {_input_reason(error)}"
    elif isinstance(error, UnknownDefinitionError):
        message = (
            f"{action}: unknown workflow definition {quote(error.name)} "
            f"version {quote(error.version)}"
        )
    elif isinstance(error, NotFoundError):
        message = (
            f"{action}: {subject} not found"
            if error.kind == "run"
            else f"{action}: the input of {subject} is missing"
        )
    elif isinstance(error, ConflictError):
        message = f"{action}: conflict for {subject}: {error.reason}"
    elif isinstance(error, ResumeBlockedError):
        # Diagnostics are control-plane text built from graph and definition names only.
        message = f"{action}: {subject} is blocked: {error.readiness_text}"
    elif isinstance(error, HistoryCursorError):
        message = f"{action}: {error}"  # public IDs and a revision only
    elif isinstance(error, CorruptRecordError):
        # Nothing of the record is shown; the operator's `flowledger check` says what.
        message = (
            f"{action}: a stored record of {subject} is corrupt "
            "(the database is damaged; `flowledger check` reports where)"
        )
    elif isinstance(error, AdoptionError | ReconciliationError):
        message = f"{action}: {subject}: {error.op} failed"
    elif isinstance(error, SupervisorClosedError | SessionOwnedError | ShutdownTimeoutError) or (
        isinstance(error, RuntimeError) and str(error) == _NOT_ACCEPTING
    ):
        message = f"{action}: the workflow supervisor is not accepting work"
    elif run_id:
        message = f"{action} failed for {subject} ({type(error).__name__})"
    else:
        message = f"{action} failed ({type(error).__name__})"
    return ToolError(message, cause=error)
