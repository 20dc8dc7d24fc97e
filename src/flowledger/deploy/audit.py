"""`audit_store`: the whole check of a database (`flowledger check`).

1. The engine's own check of its structures (`storage.Integrity.check`: SQLite's
   ``PRAGMA integrity_check``, PostgreSQL's amcheck where installed), with the values
   its problems name (an index entry that no longer finds its row).
2. Every stored value read once, so every checksum is checked (`workflows.audit.scan_values`).
3. Every run of every session read through the readers that decode it, and its records
   held against each other (`workflows.audit.audit_runs`).
4. The deploy layer's records: every saved artifact version (its record, and its blob
   against the record's size and SHA-256, validated again), every deployment revision, and
   per deployed run its pin (decoded, and its snapshots against their digests), its trace
   and its tool intents (each entry decoded).

It reads only: a read-only store will do. The `AuditReport` lists each damage with the
runs it touches; it is ``ok`` when the engine found nothing and nothing is damaged.
"""

from __future__ import annotations

import hashlib
from typing import Final

from flowledger import storage
from flowledger.workflows.audit import AuditReport, Findings, audit_runs, scan_values
from flowledger.workflows.records.run import is_id

from .artifacts.errors import ArtifactError
from .artifacts.store import ArtifactStore
from .deployments.document import DeploymentValidationError
from .deployments.pin import PinCorruptError, PinStore
from .deployments.store import DeploymentCorruptError, DeploymentNotFoundError, DeploymentStore
from .runs.intents import ToolIntents
from .runs.trace import MAX_TRACE_PAGE, RunTrace

__all__ = ["audit_store"]

_PROBE: Final = "flowledger-check"  # any key: reading one intent decodes the run's whole log
# A listed key or log name that is no valid one: a byte of it was damaged where it is stored.
_BAD_KEY: Final = "a key under it has no valid artifact or deployment name (a damaged byte)"
_BAD_LOG: Final = "its stored name is no valid name (a damaged byte)"


async def audit_store(store: storage.Store, *, limit: int = 100) -> AuditReport:
    """Check ``store`` whole (see the module docstring); ``limit`` bounds the engine's
    problems listed."""
    findings = Findings()
    database = await store.integrity.check(limit=limit)
    await scan_values(store, findings)
    await audit_runs(store, findings)
    await _artifacts_and_deployments(store, findings)
    await _deployed_runs(store, findings)
    return findings.report(database)


def _split(message: str) -> tuple[str, str]:
    """``"<key>: <reason>"`` as the deploy stores word their corrupt errors."""
    name, sep, reason = message.partition(": ")
    return (name, reason) if sep else ("", message)


async def _artifacts_and_deployments(store: storage.Store, findings: Findings) -> None:
    sessions = sorted(
        {
            key.split("/")[1]
            for key in await store.kv.keys("sessions/")
            if key.split("/")[2:3] == ["deploy"] and is_id(key.split("/")[1])
        }
    )
    artifacts = ArtifactStore.over(store)
    deployments = DeploymentStore(store.kv, store.blobs, artifacts)
    for session_id in sessions:
        try:
            records = await artifacts.list(session_id)
        except ArtifactError as exc:
            findings.add("kv", *_split(str(exc).removeprefix("stored artifact ")))
            records = []
        except ValueError:  # a listed key whose name or version is no valid one
            findings.add("kv", f"sessions/{session_id}/deploy/artifacts", _BAD_KEY)
            records = []
        for record in records:
            findings.checked["artifacts"] += 1
            try:
                await artifacts.get(session_id, record.name, record.version)
            except ArtifactError as exc:
                findings.add("blob", *_split(str(exc).removeprefix("stored artifact ")))
        try:
            listed = await deployments.list(session_id)
        except DeploymentCorruptError as exc:
            findings.add("kv", *_split(str(exc)))
            listed = []
        except ValueError:
            findings.add("kv", f"sessions/{session_id}/deploy/deployments", _BAD_KEY)
            listed = []
        for entry in listed:
            name = str(entry["name"])
            try:
                revisions = await deployments.revisions(session_id, name)
            except DeploymentCorruptError as exc:
                findings.add("kv", *_split(str(exc)))
                continue
            for revision in revisions:
                findings.checked["deployment revisions"] += 1
                try:
                    await deployments.get(session_id, name, revision)
                except (DeploymentCorruptError, DeploymentNotFoundError) as exc:
                    findings.add("kv", *_split(str(exc)))
                except (DeploymentValidationError, ArtifactError) as exc:
                    findings.add(
                        "blob", f"deployment {name} revision {revision}", f"{exc.code}: {exc}"
                    )


async def _deployed_runs(store: storage.Store, findings: Findings) -> None:
    pins = PinStore(store.ledger)
    for name in await store.ledger.names("deploy/pins/"):
        graph_run_id = name.rsplit("/", 1)[1]
        findings.checked["pins"] += 1
        try:
            pin = await pins.read(graph_run_id)
        except (PinCorruptError, storage.CorruptDataError) as exc:
            findings.add("log", name, _reason(exc))
            continue
        except storage.InvalidNameError:
            findings.add("log", name, _BAD_LOG)
            continue
        if pin is None:
            continue
        try:
            digests = pin.snapshot_digests()
            snapshots = await store.ledger.attachments(digests)
        except (KeyError, TypeError, ValueError):
            findings.add("log", name, "the pin does not name its snapshots")
            continue
        except storage.AttachmentNotFoundError as exc:
            findings.add("attachment", exc.digest, f"a snapshot of pin {name} is missing")
            continue
        for digest, data in snapshots.items():
            if hashlib.sha256(data).hexdigest() != digest:
                findings.add("attachment", digest, f"a snapshot of pin {name} fails its digest")
    trace = RunTrace(store.ledger)
    for name in await store.ledger.names("deploy/traces/"):
        graph_run_id = name.rsplit("/", 1)[1]
        findings.checked["traces"] += 1
        start = 0
        try:
            while True:
                page = await trace.read(graph_run_id, start=start, limit=MAX_TRACE_PAGE)
                start += len(page.entries)
                if not page.entries or start >= page.total:
                    break
        except storage.CorruptDataError as exc:
            findings.add("log", name, _reason(exc))
        except storage.InvalidNameError:
            findings.add("log", name, _BAD_LOG)
    intents = ToolIntents(store.ledger)
    for name in await store.ledger.names("deploy/intents/"):
        findings.checked["tool intent logs"] += 1
        try:
            await intents.get(name.rsplit("/", 1)[1], _PROBE)
        except storage.CorruptDataError as exc:
            findings.add("log", name, _reason(exc))
        except storage.InvalidNameError:
            findings.add("log", name, _BAD_LOG)


def _reason(error: BaseException) -> str:
    if isinstance(error, storage.CorruptDataError):
        if error.__cause__ is not None and not isinstance(error.__cause__, storage.StorageError):
            return f"{error.what}: it does not decode ({type(error.__cause__).__name__})"
        return f"{error.what}: {error.reason}"
    return _split(str(error))[1]
