"""The ledger checkpoint store and attachment references: skipped attachments are named
as refs, a swept one is sent again, and the backfill of logs written before references
(`LedgerCheckpointStore.backfill_refs`, `deploy.backfill_refs`) lets a sweep keep what
old logs need."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from flowledger import deploy, flow
from flowledger.deploy.deployments.pin import PIN_FORMAT, Pin, PinStore, pin_log
from flowledger.flow.ids import new_run_id
from flowledger.storage import RefsIncompleteError, Store, SweepReport, open_store

from .._postgres import postgres_url
from .test_store import make_cp


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "postgres":
        with postgres_url() as url:
            async with open_store(url) as opened:
                yield opened
        return
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/s.db"
    async with open_store(url) as opened:
        yield opened


class Spy:
    """A ledger recording the attachments and refs of every append."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.appends: list[tuple[set[str], set[str]]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def append(self, name: str, records: Any, *, refs: Iterable[str] = (), **kw: Any) -> int:
        refs = list(refs)
        self.appends.append((set(kw.get("attachments") or {}), set(refs)))
        result: int = await self.inner.append(name, records, refs=refs, **kw)
        return result


BIG = "z" * 2000  # one object: the store recognises it and skips re-encoding it


async def test_skipped_attachments_are_refs_and_keep_them(storage: Store) -> None:
    """An attachment the store skips (it knows it is stored) is named in the append's refs;
    so after the log that first sent it is dropped and swept, the other run still reads."""
    spy = Spy(storage.ledger)
    store = flow.LedgerCheckpointStore(spy)  # type: ignore[arg-type]
    first, second = new_run_id(), new_run_id()
    await store.append([make_cp(first, 0, {"doc": BIG})])
    await store.append([make_cp(second, 0, {"doc": BIG})])
    sent, refs = spy.appends[-1]
    assert refs and not sent & refs
    await storage.ledger.drop([store.log_name(first)])
    report = await storage.ledger.sweep()
    assert report.attachments == 0  # everything the first run wrote, the second refers to
    fresh = flow.LedgerCheckpointStore(storage.ledger)
    assert (await fresh.latest(second)).state == {"doc": BIG}


async def test_a_swept_attachment_is_sent_again(storage: Store) -> None:
    """When a sweep deleted an attachment the store still believes stored, its append
    fails with AttachmentNotFoundError, and the store appends once more with the bytes:
    the run reads back from a store with no cache."""
    spy = Spy(storage.ledger)
    store = flow.LedgerCheckpointStore(spy)  # type: ignore[arg-type]
    gone, later = new_run_id(), new_run_id()
    await store.append([make_cp(gone, 0, {"doc": BIG, "n": 1})])
    await storage.ledger.drop([store.log_name(gone)])
    assert (await storage.ledger.sweep()).attachments >= 2  # the field and the manifest
    await store.append([make_cp(later, 0, {"doc": BIG, "n": 1})])
    assert len(spy.appends) == 3  # the first try for ``later`` was refused, then re-sent
    assert spy.appends[-1][1] == set() and spy.appends[1][1] <= spy.appends[-1][0]
    fresh = flow.LedgerCheckpointStore(storage.ledger)
    assert (await fresh.latest(later)).state == {"doc": BIG, "n": 1}
    await store.append([make_cp(later, 1, {"doc": BIG, "n": 2})])
    assert len(spy.appends) == 4  # the cache is right again: one append
    assert [cp.state for cp in await fresh.history(later)] == [
        {"doc": BIG, "n": 1},
        {"doc": BIG, "n": 2},
    ]


async def forget_refs(storage: Store) -> None:
    """Make ``storage`` look like a database written before references: none recorded,
    and marked incomplete (what the migration to schema 4 leaves)."""
    db: Any = storage.ledger._db  # type: ignore[attr-defined]
    statements = [
        "DELETE FROM {s}attachment_refs",
        "UPDATE {s}flowledger_meta SET value = '0' WHERE key = 'refs_complete'",
    ]
    if storage.url.startswith("sqlite"):
        for statement in statements:
            db.run(lambda conn, st=statement: conn.execute(st.format(s="")))
        return
    async with db.connection() as conn:
        for statement in statements:
            await conn.execute(statement.format(s=f'"{db.settings.schema}".'))


def snapshot_pin(graph_run_id: str) -> tuple[Pin, dict[str, bytes]]:
    datas = [b"deployment revision" * 10, b"root artifact" * 10, b"child artifact" * 10]
    digests = [hashlib.sha256(d).hexdigest() for d in datas]
    document = {
        "format": PIN_FORMAT,
        "graph_run_id": graph_run_id,
        "deployment": {"digest": digests[0]},
        "artifact": {"digest": digests[1]},
        "children": [{"digest": digests[2]}],
    }
    return Pin(document), dict(zip(digests, datas, strict=True))


async def test_backfill_then_sweep_keeps_what_old_logs_need(storage: Store) -> None:
    """On a store whose logs carry no references (as before schema 4) a sweep refuses;
    deploy.backfill_refs registers the checkpoint and pin logs' references and marks them
    complete; then dropping one run and sweeping deletes only what no other log needs."""
    if storage.url.startswith("memory"):
        pytest.skip("a memory store is never older than references")
    store = flow.LedgerCheckpointStore(storage.ledger)
    dropped, kept, alone = new_run_id(), new_run_id(), new_run_id()
    shared = {"doc": BIG, "note": "y" * 100}
    await store.append([make_cp(dropped, 0, shared), make_cp(dropped, 1, {"mine": "m" * 300})])
    await store.append([make_cp(kept, 0, {"doc": BIG, "note": "y" * 100})])
    await store.append([make_cp(kept, 1, {"doc": BIG, "note": "y" * 100, "n": 2})])
    await store.append([make_cp(alone, 0, {"own": "o" * 500})])
    pin, snapshots = snapshot_pin(kept)
    await PinStore(storage.ledger).write(pin, snapshots)
    await forget_refs(storage)

    with pytest.raises(RefsIncompleteError, match="backfill_refs"):
        await storage.ledger.sweep()
    assert await deploy.backfill_refs(storage) == 4
    assert await storage.ledger.refs_complete()
    assert await storage.ledger.sweep() == SweepReport(0, 0)
    assert await store.backfill_refs() == 3  # idempotent

    await storage.ledger.drop([store.log_name(dropped)])
    report = await storage.ledger.sweep()
    # The dropped run's own field; its revision 1 is a patch on revision 0's manifest
    # (schema 2), which it shares with the kept run.
    assert report.attachments == 1
    fresh = flow.LedgerCheckpointStore(storage.ledger)
    assert (await fresh.latest(kept)).state == {"doc": BIG, "note": "y" * 100, "n": 2}
    assert (await fresh.latest(alone)).state == {"own": "o" * 500}
    assert await storage.ledger.attachments(snapshots) == snapshots
    await storage.ledger.drop([pin_log(kept)])
    assert await storage.ledger.sweep() == SweepReport(3, sum(map(len, snapshots.values())))
