"""flowledger storage for LangGraph: a checkpointer over any flowledger store.

``FlowledgerSaver`` implements LangGraph's ``BaseCheckpointSaver`` (synchronous and
asynchronous, with ``delete_thread``, ``delete_for_runs``, ``copy_thread`` and
``prune``) over ``open_store(url)``: SQLite, PostgreSQL or memory. It stores what
changed (values as content-addressed attachments, lists by what was added), JSON only
(`JsonSerializer`; a pickle is refused), optionally one writer per thread
(``single_writer=True``), and applies retention to threads (`ThreadRetention`, the
saver's ``aprune_threads``). Needs the ``langgraph`` extra: ``pip install 'flowledger[langgraph]'``.
See docs/langgraph.md.
"""

from .errors import (
    CorruptCheckpointError,
    InvalidConfigError,
    PickleRefusedError,
    SaverError,
    SaverUsageError,
    ThreadBusyError,
    ThreadConflictError,
    ThreadExistsError,
    ThreadLeaseHeldError,
    ThreadLeaseLostError,
    UnknownTypeError,
    UnserializableValueError,
    UnsupportedSerializationError,
)
from .retention import STATUSES, ThreadPruneReport, ThreadRetention
from .saver import FlowledgerSaver, SaverOpener
from .serde import JsonSerializer

__all__ = [
    "STATUSES",
    "CorruptCheckpointError",
    "FlowledgerSaver",
    "InvalidConfigError",
    "JsonSerializer",
    "PickleRefusedError",
    "SaverError",
    "SaverOpener",
    "SaverUsageError",
    "ThreadBusyError",
    "ThreadConflictError",
    "ThreadExistsError",
    "ThreadLeaseHeldError",
    "ThreadLeaseLostError",
    "ThreadPruneReport",
    "ThreadRetention",
    "UnknownTypeError",
    "UnserializableValueError",
    "UnsupportedSerializationError",
]
