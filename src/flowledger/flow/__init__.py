"""L1 flow: typed graphs of tasks run in durable super-steps.

Build a `Graph`, `compile` it over a `CheckpointStore`, and drive runs with
the `Runner`. Inside a task, `interrupt` pauses the vertex for a person or a
model (optionally with a deadline), `sleep` / `sleep_until` park it on a durable
timer, `now` reads the runner's clock, and `run_info` gives the idempotency key for
side effects. Field reducers
(`append`, or any ``(current, update) -> new`` callable in ``Annotated``) say
how parallel updates of one state field combine.
"""

from .checkpoint import (
    Checkpoint,
    ForkOrigin,
    HaltKind,
    HaltRecord,
    InterruptKind,
    InterruptRecord,
    RouteRecord,
    RunRecord,
    RunStatus,
    StepPhase,
    VertexRecord,
    VertexStatus,
)
from .codec import StateCodec
from .context import (
    InterruptSignal,
    RunInfo,
    TimedOut,
    continuation,
    interrupt,
    now,
    run_info,
    timed_out,
)
from .engine import Granularity
from .errors import (
    AmbiguousRoutingError,
    BuildError,
    CheckpointDecodeError,
    CheckpointNotFoundError,
    CodecError,
    ConditionError,
    ConflictingUpdateError,
    DeadEndError,
    DuplicateEdgeError,
    DuplicateRouteError,
    DuplicateVertexError,
    FieldUpdateError,
    FlowError,
    ForkRevisionError,
    GraphBuildError,
    GraphMismatchError,
    GraphRunExistsError,
    GraphRunMismatchError,
    GraphVersionMismatchError,
    MaxStepsExceededError,
    MissingEntryError,
    ResumeTerminalError,
    RevisionConflictError,
    StatePatchError,
    StoreError,
    TimerError,
    UndeclaredTargetError,
    UnknownVertexError,
    UnreachableVertexError,
    VertexError,
)
from .fork import ForkPlan, checkpoint_digest
from .graph import CompiledGraph, Graph
from .hooks import Hooks
from .ledger_store import LedgerCheckpointStore
from .policy import ErrorRoute, Retry
from .reducers import FieldReducer, append
from .result import Halt, Interruption, Result, StoredError
from .runner import Runner
from .store import CheckpointStore, MemoryCheckpointStore
from .timers import sleep, sleep_until

__all__ = [
    "AmbiguousRoutingError",
    "BuildError",
    "Checkpoint",
    "CheckpointDecodeError",
    "CheckpointNotFoundError",
    "CheckpointStore",
    "CodecError",
    "CompiledGraph",
    "ConditionError",
    "ConflictingUpdateError",
    "DeadEndError",
    "DuplicateEdgeError",
    "DuplicateRouteError",
    "DuplicateVertexError",
    "ErrorRoute",
    "FieldReducer",
    "FieldUpdateError",
    "FlowError",
    "ForkOrigin",
    "ForkPlan",
    "ForkRevisionError",
    "Granularity",
    "Graph",
    "GraphBuildError",
    "GraphMismatchError",
    "GraphRunExistsError",
    "GraphRunMismatchError",
    "GraphVersionMismatchError",
    "Halt",
    "HaltKind",
    "HaltRecord",
    "Hooks",
    "InterruptKind",
    "InterruptRecord",
    "InterruptSignal",
    "Interruption",
    "LedgerCheckpointStore",
    "MaxStepsExceededError",
    "MemoryCheckpointStore",
    "MissingEntryError",
    "Result",
    "ResumeTerminalError",
    "Retry",
    "RevisionConflictError",
    "RouteRecord",
    "RunInfo",
    "RunRecord",
    "RunStatus",
    "Runner",
    "StateCodec",
    "StatePatchError",
    "StepPhase",
    "StoreError",
    "StoredError",
    "TimedOut",
    "TimerError",
    "UndeclaredTargetError",
    "UnknownVertexError",
    "UnreachableVertexError",
    "VertexError",
    "VertexRecord",
    "VertexStatus",
    "append",
    "checkpoint_digest",
    "continuation",
    "interrupt",
    "now",
    "run_info",
    "sleep",
    "sleep_until",
    "timed_out",
]
