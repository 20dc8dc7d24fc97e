"""The storage error families. Every rejected call raises one of these and changes nothing."""

from __future__ import annotations

__all__ = [
    "AttachmentNotFoundError",
    "BlobConflictError",
    "BlobNotFoundError",
    "ConflictError",
    "CorruptDataError",
    "FencedWriteError",
    "InvalidValueError",
    "KeyNotFoundError",
    "LeaseHeldError",
    "LedgerConflictError",
    "RefsIncompleteError",
    "SchemaVersionError",
    "StorageError",
    "StoreBrokenError",
    "StoreClosedError",
    "StoreNotFoundError",
    "StoreOpenError",
    "ValueTooLargeError",
]


class StorageError(Exception):
    """Base class of every storage error."""


class SchemaVersionError(StorageError):
    """The database was written by a newer (or unknown) schema; nothing was changed.
    Each backend raises its own subclass, naming where (a file, a Postgres schema)."""

    found: object
    supported: int


class CorruptDataError(StorageError):
    """A stored value failed its checksum: the bytes on disk are not the bytes written;
    or (``reason`` says which) the database's own structures are damaged where a value
    was looked up, so a miss cannot be trusted (`integrity`). Nothing is returned and
    nothing is changed; ``what`` names the value (its key, or its log and sequence
    number), never its contents."""

    def __init__(self, what: str, reason: str = "it does not match its stored checksum") -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"{what} is corrupt: {reason}")


class StoreNotFoundError(StorageError, LookupError):
    """A store opened read-only does not exist (reading never creates one)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"no database at {path}")


class StoreOpenError(StorageError):
    """A store could not be opened; ``reason`` says why in words (a missing or read-only
    directory, a read-only file, a file that is not a flowledger database)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot open the database {path}: {reason}")


class StoreClosedError(StorageError):
    """The store was used after `close()`."""

    def __init__(self) -> None:
        super().__init__("store is closed")


class StoreBrokenError(StorageError):
    """The store found its files changed under it in a way its database engine cannot
    survive (for SQLite: the database file replaced, or its ``-wal`` or ``-shm`` file
    deleted, while it was open). From then on it refuses every write, and its leases are
    lost (reason ``"broken"``): continuing could corrupt the database or let two owners
    write at once. ``path`` is the database file, ``reason`` what was found."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"store {path!r} is broken and refuses writes: {reason} while it was open. "
            f"Stop every process using it; the writes since the last checkpoint of its "
            f"write-ahead log may be lost"
        )


class ValueTooLargeError(StorageError, ValueError):
    """A value, blob, record or attachment is over its documented size limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what = what
        self.size = size
        self.limit = limit
        super().__init__(f"{what} is {size} bytes; the limit is {limit}")


class InvalidValueError(StorageError, TypeError):
    """An argument has the wrong type (values are `bytes`, revisions non-negative `int`)."""

    def __init__(self, what: str, expected: str, got: object) -> None:
        self.what = what
        super().__init__(f"{what} must be {expected}, not {type(got).__name__}")


class KeyNotFoundError(StorageError, KeyError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)

    def __str__(self) -> str:
        return f"key not found: {self.key!r}"


class ConflictError(StorageError):
    """A compare-and-swap `put` saw another revision than the one it expected."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        self.key = key
        self.expected = expected
        self.actual = actual  # 0 when the key is absent
        super().__init__(f"revision conflict on {key!r}: expected {expected}, found {actual}")


class BlobNotFoundError(StorageError, KeyError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)

    def __str__(self) -> str:
        return f"blob not found: {self.key!r}"


class BlobConflictError(StorageError):
    """A blob already exists under this key with different bytes; the original is kept."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"blob {key!r} already exists with different bytes")


class LedgerConflictError(StorageError):
    """A compare-and-append found another tip than the one it expected."""

    def __init__(self, name: str, expected: int, actual: int) -> None:
        self.name = name
        self.expected = expected
        self.actual = actual
        super().__init__(f"ledger {name!r} tip is {actual}, expected {expected}")


class AttachmentNotFoundError(StorageError, KeyError):
    def __init__(self, digest: str) -> None:
        self.digest = digest
        super().__init__(digest)

    def __str__(self) -> str:
        return f"attachment not found: {self.digest}"


class RefsIncompleteError(StorageError):
    """`Ledger.sweep` or `Ledger.usage` on a database whose logs were (partly) written
    before references were recorded: it cannot tell which attachments are still needed,
    so it refuses and changes nothing. Register the old logs' references first."""

    def __init__(self) -> None:
        super().__init__(
            "the ledger's attachment references are incomplete (logs written before "
            "flowledger recorded them), so no attachment may be deleted yet: run "
            "`flowledger backfill-refs` (flowledger.deploy.backfill_refs(store)) once, with "
            "every process on this version, to register them"
        )


class FencedWriteError(StorageError):
    """A fenced write found its lease no longer held at its epoch (released, expired, or
    granted to another holder since); nothing was written. ``current`` is the lease's
    epoch now (0 if it was never granted), ``held`` whether that grant is live."""

    def __init__(self, lease: str, epoch: int, current: int, held: bool) -> None:
        self.lease = lease
        self.epoch = epoch
        self.current = current
        self.held = held
        if current != epoch:
            now = f"it is at epoch {current}" + ("" if held else " and free")
        else:
            now = "it was released or has expired"
        super().__init__(
            f"write refused: lease {lease!r} is no longer held at epoch {epoch} ({now})"
        )


class LeaseHeldError(StorageError):
    """Another live holder has the lease."""

    def __init__(self, name: str, holder_epoch: int) -> None:
        self.name = name
        self.holder_epoch = holder_epoch
        super().__init__(f"lease {name!r} is held at epoch {holder_epoch}")
