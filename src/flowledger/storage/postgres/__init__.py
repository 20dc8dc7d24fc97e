"""The PostgreSQL backend: many processes on many machines sharing one database
(docs/storage.md). Its semantics are the memory oracle's (the conformance suite compares
them); each module documents its part: `url` (URLs and options), `database` (the pool,
transactions, fences, lost acknowledgements, pooling, checksums), `checkout` (a call's
connection), `queries` (the statements), `arrays` (the append's array parameters),
`integrity` (confirming a miss, amcheck), `kv`, `blobs`, `ledger`, `collection`
(references, sweep, drop, space), `leases` and `schema` (versions and migrations).
"""

from .blobs import PostgresBlobs
from .connect import connect_postgres
from .integrity import PostgresIntegrity
from .kv import PostgresKV
from .leases import PostgresLeaseBackend
from .ledger import PostgresLedger
from .schema import SCHEMA_VERSION, SchemaVersionError
from .url import PostgresSettings, parse_postgres_url

__all__ = [
    "SCHEMA_VERSION",
    "PostgresBlobs",
    "PostgresIntegrity",
    "PostgresKV",
    "PostgresLeaseBackend",
    "PostgresLedger",
    "PostgresSettings",
    "SchemaVersionError",
    "connect_postgres",
    "parse_postgres_url",
]
