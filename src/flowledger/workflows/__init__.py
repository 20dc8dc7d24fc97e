"""L2 workflows: the bridge from flow graphs to durable, session-owned workflow runs.

`Metadata` and `TypedDefinition` describe a workflow (strict JSON Schema for its input and
resume payloads); a `Catalog` holds the registered definitions; the `RunRegistry` (over
storage KV) and the `InputStore` (over storage Blobs) keep each run's record and its
canonical input; the `Supervisor` owns a session's runs (lease, start, adoption after a
restart, resume, cancel); the `ActivityJournal` keeps the bounded, safe activity history.
"""

from .activity import ActivityKind, ActivityRecord, ProjectedActivity, event_id, project
from .catalog import Catalog
from .definition import (
    Definition,
    ErrorPolicy,
    TypedDefinition,
    ValidatedInput,
    ValidatedResume,
    WorkflowResult,
)
from .errors import (
    ActivityValidationError,
    AdoptionError,
    ConflictError,
    CorruptRecordError,
    DefinitionError,
    DuplicateDefinitionError,
    HistoryCursorError,
    InvalidForkError,
    InvalidInputError,
    InvalidSchemaError,
    NotFoundError,
    ReconciliationError,
    ResumeBlockedError,
    SessionOwnedError,
    ShutdownTimeoutError,
    SupervisorActiveError,
    SupervisorClosedError,
    UnknownDefinitionError,
    WorkflowError,
)
from .forks import fork_marker_key, fork_run
from .history import HistoryPage, page_history
from .inputs import InputStore, canonical_json
from .journal import ActivityJournal, ActivitySubscription
from .metadata import Metadata, VertexMetadata, bound_summary, bound_text
from .pending import PausedVertex, PauseKind, Pending, PendingStore
from .readiness import Diagnostic, ReadinessStatus, ResumeReadiness
from .registry import RunPage, RunRegistry
from .run import ArtifactReference, ForkedFrom, InputReference, Run, RunStatus
from .supervisor import StartTicket, Supervisor

__all__ = [
    "ActivityJournal",
    "ActivityKind",
    "ActivityRecord",
    "ActivitySubscription",
    "ActivityValidationError",
    "AdoptionError",
    "ArtifactReference",
    "Catalog",
    "ConflictError",
    "CorruptRecordError",
    "Definition",
    "DefinitionError",
    "Diagnostic",
    "DuplicateDefinitionError",
    "ErrorPolicy",
    "ForkedFrom",
    "HistoryCursorError",
    "HistoryPage",
    "InputReference",
    "InputStore",
    "InvalidForkError",
    "InvalidInputError",
    "InvalidSchemaError",
    "Metadata",
    "NotFoundError",
    "PauseKind",
    "PausedVertex",
    "Pending",
    "PendingStore",
    "ProjectedActivity",
    "ReadinessStatus",
    "ReconciliationError",
    "ResumeBlockedError",
    "ResumeReadiness",
    "Run",
    "RunPage",
    "RunRegistry",
    "RunStatus",
    "SessionOwnedError",
    "ShutdownTimeoutError",
    "StartTicket",
    "Supervisor",
    "SupervisorActiveError",
    "SupervisorClosedError",
    "TypedDefinition",
    "UnknownDefinitionError",
    "ValidatedInput",
    "ValidatedResume",
    "VertexMetadata",
    "WorkflowError",
    "WorkflowResult",
    "bound_summary",
    "bound_text",
    "canonical_json",
    "event_id",
    "fork_marker_key",
    "fork_run",
    "page_history",
    "project",
]
