"""The pin: the execution environment a deployed run started with, immutable and bound
to the run.

A `Pin` records the run and graph run ids, the deployment revision (name, number,
digest of its bytes), the root artifact and every child of its closure (name, version,
digest), the drift policy, and per dependency the source's identity (transport fields,
variable and header *names*, which of them are secrets; never a value), the server's
self-description, and per tool the artifact calls its contract and full fingerprints
and read-only / idempotent annotations (for a function of a Python source also
``python``: its module, qualified name, distribution and version; for an operation of
an OpenAPI source ``openapi``: its method and path, the server part holding the
document's digest).

`PinStore` keeps one pin per graph run as the single record of the ledger log
``deploy/pins/<graph run id>``, appended with ``expected=0``: a log holds at most one
record and records never change, so a pin cannot be replaced once written. The record
is the pin's RFC 8785 canonical JSON; the canonical bytes of the deployment revision and
of every artifact of the closure go with it as attachments (content-addressed, in the
same transaction), so the pin carries snapshots of what it names.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import rfc8785

from ... import storage

__all__ = ["PIN_FORMAT", "Pin", "PinCorruptError", "PinStore", "pin_log"]

PIN_FORMAT: Final = "flowledger.pin/v1"
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


class PinCorruptError(Exception):
    pass


@dataclass(frozen=True)
class Pin:
    """A pin as JSON data (`document`) with accessors for what readers need."""

    document: Mapping[str, Any]

    @property
    def graph_run_id(self) -> str:
        return str(self.document["graph_run_id"])

    @property
    def deployment(self) -> Mapping[str, Any]:
        result: Mapping[str, Any] = self.document["deployment"]
        return result

    @property
    def sources(self) -> Mapping[str, Mapping[str, Any]]:
        result: Mapping[str, Mapping[str, Any]] = self.document["sources"]
        return result

    @property
    def drift(self) -> str:
        return str(self.document["drift"])

    def snapshot_digests(self) -> list[str]:
        """The digests of the snapshots stored with the pin: the deployment revision's and
        every artifact's of the closure."""
        artifacts = [self.document["artifact"], *self.document.get("children", [])]
        return [str(self.deployment["digest"]), *(str(a["digest"]) for a in artifacts)]

    def canonical(self) -> bytes:
        return rfc8785.dumps(dict(self.document))

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.canonical())
        result["digest"] = self.digest
        return result


def pin_log(graph_run_id: str) -> str:
    return storage.validate_name(f"deploy/pins/{graph_run_id}")


class PinStore:
    """Pins in a store's ledger, one per graph run, written once."""

    def __init__(self, ledger: storage.Ledger) -> None:
        self._ledger = ledger

    async def write(self, pin: Pin, snapshots: Mapping[str, bytes]) -> None:
        """Write ``pin`` (with ``snapshots``: hex SHA-256 -> bytes) as the only record of
        its log. `storage.LedgerConflictError` if the run already has a pin."""
        attachments = {hashlib.sha256(data).hexdigest(): data for data in snapshots.values()}
        await self._ledger.append(
            pin_log(pin.graph_run_id), [pin.canonical()], expected=0, attachments=attachments
        )

    async def backfill_refs(self) -> int:
        """Register, with `Ledger.add_refs`, the snapshots every pin log refers to (for a
        database written before the ledger recorded references); return how many pin logs
        it registered. A pin that does not parse is passed over (it cannot be read)."""
        logs = 0
        for name in await self._ledger.names("deploy/pins/"):
            records = await self._ledger.read(name, after=0, limit=1)
            try:
                digests = Pin(json.loads(records[0].payload)).snapshot_digests()
            except (IndexError, ValueError, KeyError, TypeError):
                continue
            await self._ledger.add_refs(name, [d for d in digests if _DIGEST.fullmatch(d)])
            logs += 1
        return logs

    async def read(self, graph_run_id: str) -> Pin | None:
        name = pin_log(graph_run_id)
        records = await self._ledger.read(name, after=0, limit=1)
        if not records:
            return None
        try:
            document = json.loads(records[0].payload)
        except ValueError as exc:
            raise PinCorruptError(f"{name}: {exc}") from None
        if (
            not isinstance(document, dict)
            or document.get("format") != PIN_FORMAT
            or document.get("graph_run_id") != graph_run_id
        ):
            raise PinCorruptError(f"{name}: not the {PIN_FORMAT} pin of this graph run")
        return Pin(document)
