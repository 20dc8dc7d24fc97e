"""Runtime: the processes that own a session and execute its runs.

A `Catalog` holds the definitions an application serves. The `Supervisor` (`supervisor`)
owns one session through its lease and starts, adopts, resumes and cancels its runs; a
`WorkflowSession` (`session`) wires a store, a catalog and a supervisor together; a
`FrontDoor` (`frontdoor`) changes a session it does not own through durable requests that
a `Worker` (`worker`) carries out. `resumption` checks every resume first, `stopping` stops
a supervisor at a vertex boundary, `ownership` tells a reader who owns a run, and
`fork_run` (`forks`) makes a new run of a definition version from any revision of another.
"""

from .catalog import Catalog
from .forks import fork_run
from .frontdoor import FrontDoor, FrontDoorTicket
from .session import WorkflowSession
from .supervisor import StartTicket, Supervisor
from .worker import Worker, WorkerSettings

__all__ = [
    "Catalog",
    "FrontDoor",
    "FrontDoorTicket",
    "StartTicket",
    "Supervisor",
    "Worker",
    "WorkerSettings",
    "WorkflowSession",
    "fork_run",
]
