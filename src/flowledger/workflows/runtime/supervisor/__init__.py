"""The supervisor: the session-owned runtime that executes and adopts a session's runs.

`Supervisor` (`owner`) holds a session's lease, its state and its public operations; each
path a run takes through it is a module of its own: `start` and `seeding` (a new run),
`adoption` (continuing runs from durable state after a restart), `resume`, `cancel`,
`polling` (requests from front doors), `history` (reading, and repairing a damaged
journal). They share `workers` (background workers, per-run locks, the lease's fence),
`writes` (record transitions), `publication` (activities before status), `outcomes` (what
a segment ended with), `failures` (what fails a run and what only blocks it) and `misses`
(a miss confirmed with the store before anything is written on the strength of it).
"""

from .owner import Supervisor
from .start import StartTicket

__all__ = ["StartTicket", "Supervisor"]
