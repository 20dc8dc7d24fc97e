"""Records: the durable state of a session's runs and the key layout that holds it.

A `Run` (`run`) is one run's record under ``sessions/<session>/workflows/runs/<run>``; the
`RunRegistry` (`registry`) reads, lists and swaps those records, with the
`UnfinishedIndex` (`unfinished`) of the runs still to finish. Beside the record live the
run's canonical input (`InputStore`, `inputs`; `input_claims` lets a pruner delete a
shared input blob safely while runs with the same input start), what a paused run waits
for (`PendingStore`, `pending`), durable cancel intents (`intent`), the requests front
doors leave for the owner (`requests`), and the markers of forked runs (`forks`).
"""

from .forks import fork_marker_key
from .inputs import InputStore, canonical_json
from .pending import PausedVertex, PauseKind, Pending, PendingStore
from .registry import RunPage, RunRegistry
from .run import ArtifactReference, ForkedFrom, InputReference, Run, RunStatus

__all__ = [
    "ArtifactReference",
    "ForkedFrom",
    "InputReference",
    "InputStore",
    "PauseKind",
    "PausedVertex",
    "Pending",
    "PendingStore",
    "Run",
    "RunPage",
    "RunRegistry",
    "RunStatus",
    "canonical_json",
    "fork_marker_key",
]
