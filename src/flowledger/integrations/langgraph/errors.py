"""The typed errors of the LangGraph checkpointer: each says what went wrong and where.

Every error is a `SaverError`. Errors about bad input (`InvalidConfigError`,
`UnserializableValueError`, `UnsupportedSerializationError`) are raised before anything
is written; errors about stored data (`PickleRefusedError`, `CorruptCheckpointError`,
`UnknownTypeError`) are raised instead of returning anything; the single-writer errors
(`ThreadLeaseHeldError`, `ThreadLeaseLostError`, `ThreadConflictError`) mean another
process writes (or wrote) the thread, and nothing of this write was stored.
"""

from __future__ import annotations

__all__ = [
    "CorruptCheckpointError",
    "InvalidConfigError",
    "PickleRefusedError",
    "SaverError",
    "SaverUsageError",
    "ThreadBusyError",
    "ThreadConflictError",
    "ThreadExistsError",
    "ThreadLeaseHeldError",
    "ThreadLeaseLostError",
    "UnknownTypeError",
    "UnserializableValueError",
    "UnsupportedSerializationError",
]


class SaverError(Exception):
    """Base of every error of `flowledger.integrations.langgraph`."""


class InvalidConfigError(SaverError, ValueError):
    """A config, checkpoint or argument the saver cannot use (``where`` names the part)."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


class UnserializableValueError(SaverError, TypeError):
    """A value has no JSON form (``where`` names the channel or write and the path in it)."""

    def __init__(self, where: str, type_name: str, hint: str = "") -> None:
        self.where = where
        self.type_name = type_name
        message = f"cannot store {where}: a {type_name} has no JSON form"
        super().__init__(f"{message} ({hint})" if hint else message)


class UnsupportedSerializationError(SaverError):
    """The saver's serializer produced (or a stored value carries) a format that is not
    JSON; flowledger stores JSON only."""

    def __init__(self, where: str, type_tag: str) -> None:
        self.where = where
        self.type_tag = type_tag
        super().__init__(
            f"{where}: format {type_tag!r} is not JSON; flowledger stores and loads JSON "
            "only (use flowledger's JsonSerializer, or an EncryptedSerializer around it)"
        )


class PickleRefusedError(SaverError):
    """A stored value says it is a pickle; flowledger never unpickles anything."""

    def __init__(self, where: str, type_tag: str) -> None:
        self.where = where
        self.type_tag = type_tag
        super().__init__(
            f"refusing to load {where}: it is stored as {type_tag!r}, and flowledger never "
            "loads pickled data (a pickle can run code when it is loaded)"
        )


class CorruptCheckpointError(SaverError):
    """Stored bytes that do not decode as what they should be (``where`` names them)."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"stored checkpoint data {where} is unreadable: {reason}")


class UnknownTypeError(SaverError):
    """A stored value names a class the serializer may not rebuild."""

    def __init__(self, where: str, class_path: str, reason: str) -> None:
        self.where = where
        self.class_path = class_path
        self.reason = reason
        super().__init__(
            f"cannot load {where}: class {class_path} {reason} (pass it to "
            "JsonSerializer(types=[...]) to allow it)"
        )


class ThreadLeaseHeldError(SaverError):
    """With ``single_writer``: another process holds the thread's lease (it is writing
    the thread); nothing was written."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} is being written by another process (it holds the "
            "thread's lease); nothing was written"
        )


class ThreadLeaseLostError(SaverError):
    """With ``single_writer``: this saver's lease of the thread ended before the write
    (expired while the process stalled, or taken over); nothing was written."""

    def __init__(self, thread_id: str, reason: str) -> None:
        self.thread_id = thread_id
        self.reason = reason
        super().__init__(f"lost the lease of thread {thread_id!r} ({reason}); nothing was written")


class ThreadConflictError(SaverError):
    """With ``single_writer``: the thread moved on since this saver last read it (another
    process wrote it), so writing now would fork its history; nothing was written."""

    def __init__(self, thread_id: str, checkpoint_ns: str) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        where = f"thread {thread_id!r}" + (f" namespace {checkpoint_ns!r}" if checkpoint_ns else "")
        super().__init__(
            f"{where} was written by another process since this saver last read it; "
            "nothing was written (read the thread again, e.g. invoke the graph again)"
        )


class ThreadBusyError(SaverError):
    """Another process is rewriting the thread (pruning, copying into or deleting it) and
    did not finish within a minute."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} is being pruned, copied or deleted by another process; "
            "try again when it is done"
        )


class ThreadExistsError(SaverError):
    """`copy_thread` into a thread that already has checkpoints."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"cannot copy into thread {thread_id!r}: it already has checkpoints")


class SaverUsageError(SaverError, RuntimeError):
    """The saver was used in a way that cannot work (a synchronous call on the event loop
    that runs the saver, a call after close)."""
