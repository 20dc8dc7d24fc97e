"""`InputClaims`: deleting a shared input blob safely while runs with the same input start.

A run's input blob (``sessions/<sid>/workflows/inputs/sha256/<digest>``) is shared by
every run of the session with the same input, and a starter writes the blob *before* the
run record that refers to it. Blobs and KV keys commit separately, so a pruner that
checked "no record refers to this digest" cannot simply delete the blob: a starter may
have stored (a no-op: it was there) and then created its record in between.

The protocol has one marker per digest being deleted,
``sessions/<sid>/workflows/inputs-condemned/<digest>``, holding the pruner's lease grant
``{"version":1,"lease":NAME,"epoch":E}``:

* the pruner, holding its lease, (1) writes the marker, (2) then lists the session's run
  records again and keeps every digest a record it had not seen refers to, (3) deletes
  the blob with a write fenced by its grant, (4) deletes the marker;
* a starter, after creating its run record and before anything reads the input,
  (a) reads the marker: while it is there and its grant is current, it waits; (b) then
  stores the blob again (`keep`), which restores it if a pruner deleted it.

Why no run is left without its input: if the starter reads no marker (or a marker whose
grant has ended), every pruner that could still delete the blob wrote its marker after
that read, hence after the record exists, so its step (2) sees the record and keeps the
blob; a pruner that deleted it earlier has done so before (b) restores it. A fenced
delete cannot land after its grant ended, which is why an expired grant is as good as
no marker. A pruner that finds a marker whose grant has ended takes it over by
compare-and-swap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ...storage import KV, Blobs, KeyNotFoundError, Lease, Leaser, validate_name
from ...storage import ConflictError as StorageConflictError
from ..errors import WorkflowError
from .run import input_key, is_digest, runs_prefix

__all__ = ["CONDEMNED_SEGMENT", "InputBusyError", "InputClaims", "condemned_key"]

CONDEMNED_SEGMENT: Final = "workflows/inputs-condemned/"
_VERSION: Final = 1
_POLL: Final = 0.02
DEFAULT_WAIT: Final = 60.0


class InputBusyError(WorkflowError):
    """A pruner kept this input condemned for longer than a starter waits."""

    def __init__(self, session_id: str, digest: str, waited: float) -> None:
        self.session_id = session_id
        self.digest = digest
        super().__init__(
            f"input {digest} of session {session_id} is being pruned (waited {waited:g}s); "
            "start the run again"
        )


def condemned_key(session_id: str, digest: str) -> str:
    """``sessions/<sid>/workflows/inputs-condemned/<digest>``."""
    if not is_digest(digest):
        raise ValueError(f"input digest must be 64 lowercase hex characters, not {digest!r}")
    base = runs_prefix(session_id).removesuffix("workflows/runs/")
    return validate_name(base + CONDEMNED_SEGMENT + digest)


@dataclass(frozen=True)
class _Grant:
    lease: str
    epoch: int

    def encode(self) -> bytes:
        doc = {"version": _VERSION, "lease": self.lease, "epoch": self.epoch}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> _Grant | None:
        try:
            doc = json.loads(data)
            lease, epoch = doc["lease"], doc["epoch"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(lease, str) or not isinstance(epoch, int) or isinstance(epoch, bool):
            return None
        return cls(lease, epoch)


class InputClaims:
    """Both sides of the protocol in the module documentation."""

    def __init__(self, kv: KV, blobs: Blobs, leases: Leaser) -> None:
        self._kv = kv
        self._blobs = blobs
        self._leases = leases

    async def _current(self, data: bytes) -> bool:
        grant = _Grant.decode(data)
        if grant is None:
            return False  # unreadable: no grant proves anything, so nothing can delete
        status = await self._leases.status(grant.lease)
        return status.held and status.epoch == grant.epoch

    # -- the starter's side ----------------------------------------------------------------

    async def keep(
        self, session_id: str, digest: str, data: bytes, *, wait: float = DEFAULT_WAIT
    ) -> None:
        """After the run record exists: wait out a pruner deleting this input, then store
        the blob again. `InputBusyError` after ``wait`` seconds of a live marker."""
        key = condemned_key(session_id, digest)
        started = time.monotonic()
        while True:
            try:
                entry = await self._kv.get(key)
            except KeyNotFoundError:
                break
            if not await self._current(entry.value):
                break
            waited = time.monotonic() - started
            if waited >= wait:
                raise InputBusyError(session_id, digest, waited)
            await asyncio.sleep(_POLL)
        await self._blobs.put(input_key(session_id, digest), data)

    # -- the pruner's side -----------------------------------------------------------------

    async def condemn(self, session_id: str, digests: Iterable[str], lease: Lease) -> list[str]:
        """Write a marker for each digest (step 1); return the digests now condemned by
        ``lease`` (one marked by another pruner whose grant is current is left out)."""
        mine = _Grant(lease.name, lease.epoch).encode()
        condemned: list[str] = []
        for digest in digests:
            key = condemned_key(session_id, digest)
            try:
                await self._kv.put(key, mine, expected=0, fence=lease.fence)
            except StorageConflictError:
                try:
                    entry = await self._kv.get(key)
                except KeyNotFoundError:
                    continue  # its pruner just finished; the next pass looks again
                if await self._current(entry.value):
                    continue
                try:
                    await self._kv.put(key, mine, expected=entry.revision, fence=lease.fence)
                except StorageConflictError:
                    continue
            condemned.append(digest)
        return condemned

    async def delete(self, session_id: str, digest: str, lease: Lease) -> None:
        """Step 3: delete the blob under ``lease``'s fence (refused once the grant ended)."""
        await self._blobs.delete(input_key(session_id, digest), fence=lease.fence)

    async def release(self, session_id: str, digests: Iterable[str], lease: Lease) -> None:
        """Step 4 (or giving up): remove the markers, fenced: once the grant has ended a
        marker may be another pruner's (taken over), and stays."""
        for digest in digests:
            await self._kv.delete(condemned_key(session_id, digest), fence=lease.fence)
