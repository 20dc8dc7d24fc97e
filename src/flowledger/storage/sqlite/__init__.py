"""The SQLite backend: the embedded default, one database file shared by any number of
processes (docs/storage.md). Its semantics are the memory oracle's (the conformance
suite compares them); each module documents its part: `url` (URLs and options),
`database` (the connection, transactions, file checks, checksums), `integrity`
(confirming a miss, `PRAGMA integrity_check`), `worker` (calls and group commit), `kv`,
`blobs`, `ledger`, `collection` (references, sweep, drop, space), `leases` and `schema`
(versions and migrations).
"""

from .blobs import SQLiteBlobs
from .connect import connect_sqlite
from .integrity import SQLiteIntegrity
from .kv import SQLiteKV
from .leases import SQLiteLeaseBackend
from .ledger import SQLiteLedger
from .schema import SCHEMA_VERSION, SchemaVersionError
from .url import SQLiteSettings, parse_sqlite_url

__all__ = [
    "SCHEMA_VERSION",
    "SQLiteBlobs",
    "SQLiteIntegrity",
    "SQLiteKV",
    "SQLiteLeaseBackend",
    "SQLiteLedger",
    "SQLiteSettings",
    "SchemaVersionError",
    "connect_sqlite",
    "parse_sqlite_url",
]
