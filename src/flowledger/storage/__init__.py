"""L0 storage: bytes only, no knowledge of workflows.

Four primitives (`KV`, `Blobs`, `Ledger`, `Leaser`) behind one URL
(`open_store`). Every backend passes the same conformance suite
(``tests/storage``); the memory backend is the oracle.
"""

from .blobs import Blobs
from .errors import (
    AttachmentNotFoundError,
    BlobConflictError,
    BlobNotFoundError,
    ConflictError,
    CorruptDataError,
    FencedWriteError,
    InvalidValueError,
    KeyNotFoundError,
    LeaseHeldError,
    LedgerConflictError,
    RefsIncompleteError,
    SchemaVersionError,
    StorageError,
    StoreBrokenError,
    StoreClosedError,
    StoreNotFoundError,
    StoreOpenError,
    ValueTooLargeError,
)
from .fence import Fence, FenceArg, current_fence, fence_arg, fencing
from .integrity import EngineCheck, Integrity, Unchecked
from .kv import (
    KV,
    MAX_KV_BATCH_BYTES,
    MAX_KV_WRITES,
    BatchKV,
    Entry,
    KVDelete,
    KVPut,
    KVWrite,
    PagedKV,
)
from .lease import Lease, Leaser, LeaseStatus, LostReason
from .ledger import Ledger, LedgerUsage, Record, SweepReport, digest_of
from .limits import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS_PER_APPEND,
    MAX_BLOB_BYTES,
    MAX_KV_VALUE_BYTES,
    MAX_READ_LIMIT,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_APPEND,
    MAX_REFS_PER_APPEND,
)
from .names import MAX_NAME_BYTES, InvalidNameError, validate_name
from .store import Store, StoreOpener, UnsupportedURLError, open_store
from .wakeups import InvalidChannelError, Listener, Wakeups, waking

__all__ = [
    "KV",
    "MAX_ATTACHMENTS_PER_APPEND",
    "MAX_ATTACHMENT_BYTES",
    "MAX_BLOB_BYTES",
    "MAX_KV_BATCH_BYTES",
    "MAX_KV_VALUE_BYTES",
    "MAX_KV_WRITES",
    "MAX_NAME_BYTES",
    "MAX_READ_LIMIT",
    "MAX_RECORDS_PER_APPEND",
    "MAX_RECORD_BYTES",
    "MAX_REFS_PER_APPEND",
    "AttachmentNotFoundError",
    "BatchKV",
    "BlobConflictError",
    "BlobNotFoundError",
    "Blobs",
    "ConflictError",
    "CorruptDataError",
    "EngineCheck",
    "Entry",
    "Fence",
    "FenceArg",
    "FencedWriteError",
    "Integrity",
    "InvalidChannelError",
    "InvalidNameError",
    "InvalidValueError",
    "KVDelete",
    "KVPut",
    "KVWrite",
    "KeyNotFoundError",
    "Lease",
    "LeaseHeldError",
    "LeaseStatus",
    "Leaser",
    "Ledger",
    "LedgerConflictError",
    "LedgerUsage",
    "Listener",
    "LostReason",
    "PagedKV",
    "Record",
    "RefsIncompleteError",
    "SchemaVersionError",
    "StorageError",
    "Store",
    "StoreBrokenError",
    "StoreClosedError",
    "StoreNotFoundError",
    "StoreOpenError",
    "StoreOpener",
    "SweepReport",
    "Unchecked",
    "UnsupportedURLError",
    "ValueTooLargeError",
    "Wakeups",
    "current_fence",
    "digest_of",
    "fence_arg",
    "fencing",
    "open_store",
    "validate_name",
    "waking",
]
