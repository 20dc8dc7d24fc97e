"""Conformance by comparison: random operation sequences against a backend and the oracle.

A hypothesis state machine applies each operation to the backend under test and to a
fresh memory store, and requires the same outcome: equal results, or exceptions of the
same type with equal fields. Names come from a tiny alphabet (with some invalid ones)
so that collisions, conflicts and errors are frequent.

KV revision numbers are compared by meaning, not value: the contract only promises that
a key's revisions strictly increase, so each backend's revisions are mapped to the
ordinal of the write that produced them (and checked to increase).

Every example runs in a fresh namespace (``sm<n>/``) of one store opened on the backend
URL, and its attachment bytes carry that namespace, so examples cannot see each other.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from flowledger.storage import (
    ConflictError,
    InvalidNameError,
    Store,
    digest_of,
    open_store,
    validate_name,
)

NAMES = ["a", "a/b", "a-b", "b", "a", "a/b", "A", "a//b"]  # the last two are invalid
PREFIXES = ["", "a", "a/", "b", "a_", "A", "%"]
VALUES = [b"", b"x", b"\x00\xff"]
RECORDS = [b"r", b"s", b""]
ATTACHMENT_SEEDS = [b"p", b"q", b"r", b"never attached"]

_namespaces = itertools.count()
Outcome = tuple[str, Any]


def _open(url: str) -> Callable[[], Awaitable[Store]]:
    async def opener() -> Store:
        return await open_store(url)

    return opener


def make_machine(url: str) -> type[RuleBasedStateMachine]:
    class StoreMatchesOracle(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.ns = f"sm{next(_namespaces)}/"
            self.stores: dict[str, Store] = {}
            self.stores["oracle"] = self.loop.run_until_complete(_open("memory://")())
            self.stores["subject"] = self.loop.run_until_complete(_open(url)())
            # key -> {backend revision: ordinal of the write}, per side; reset on delete.
            self.revisions: dict[str, dict[str, dict[int, int]]] = {
                side: {} for side in self.stores
            }
            self.writes: dict[str, int] = {}
            seeds = [self.ns.encode() + seed for seed in ATTACHMENT_SEEDS]
            self.attachment_data = {digest_of(d): d for d in seeds}

        def teardown(self) -> None:
            try:
                for store in self.stores.values():
                    self.loop.run_until_complete(store.close())
            finally:
                self.loop.close()

        # --- helpers ------------------------------------------------------------------

        def both(self, op: Callable[[Store], Awaitable[Any]]) -> dict[str, Outcome]:
            outcomes: dict[str, Outcome] = {}
            for side, store in self.stores.items():
                try:
                    outcomes[side] = ("ok", self.loop.run_until_complete(op(store)))
                except Exception as exc:
                    outcomes[side] = ("error", exc)
            return outcomes

        def norm_rev(self, side: str, key: str, rev: int) -> object:
            if rev == 0:
                return 0
            ordinal = self.revisions[side].get(key, {}).get(rev)
            return ("write", ordinal) if ordinal is not None else ("unknown", rev)

        def describe(self, side: str, outcome: Outcome) -> object:
            kind, value = outcome
            if kind == "ok":
                return ("ok", value)
            exc = value
            if isinstance(exc, ConflictError):
                return (
                    "ConflictError",
                    exc.key,
                    self.norm_rev(side, exc.key, exc.expected),
                    self.norm_rev(side, exc.key, exc.actual),
                )
            fields = ("key", "name", "digest", "rule", "what", "size", "limit", "expected")
            return (
                type(exc).__name__,
                tuple((f, getattr(exc, f)) for f in fields if hasattr(exc, f)),
                # actual only for LedgerConflictError (ledger tips are contract-exact)
                getattr(exc, "actual", None),
            )

        def same(self, outcomes: dict[str, Outcome], what: str) -> object:
            described = {side: self.describe(side, o) for side, o in outcomes.items()}
            assert described["subject"] == described["oracle"], (what, outcomes)
            return described["oracle"]

        def valid(self, name: str) -> bool:
            try:
                validate_name(self.ns + name)
            except InvalidNameError:
                return False
            return True

        @initialize(seeded=st.sets(st.sampled_from(["a", "a/b", "a-b", "b"])))
        def seed(self, seeded: set[str]) -> None:
            """Start some examples with keys, blobs and logs so later steps collide."""
            for name in sorted(seeded):
                self.kv_put(name=name, value=b"seed", which="create")
                self.blob_put(name=name, data=b"seed")
                self.ledger_append(
                    name=name, records=[b"r", b"s"], delta=0, attach={0}, corrupt=False, refer=[]
                )

        # --- KV -----------------------------------------------------------------------

        @rule(
            name=st.sampled_from(NAMES),
            value=st.sampled_from(VALUES),
            which=st.sampled_from(["create", "current", "current", "previous", "bogus"]),
        )
        def kv_put(self, name: str, value: bytes, which: str) -> None:
            key = self.ns + name
            known = {side: self.revisions[side].get(key, {}) for side in self.stores}
            ordinals = sorted(known["oracle"].values())
            assert ordinals == sorted(known["subject"].values())
            if which == "create":
                target = 0
            elif which == "current" and ordinals:
                target = ordinals[-1]
            elif which == "previous" and len(ordinals) > 1:
                target = ordinals[-2]
            else:
                target = -1
            expected = {}
            for side in self.stores:
                by_ordinal = {o: r for r, o in known[side].items()}
                expected[side] = by_ordinal.get(target, 0) if target >= 0 else 10**6 + 7

            outcomes: dict[str, Outcome] = {}
            for side, store in self.stores.items():
                try:
                    rev = self.loop.run_until_complete(
                        store.kv.put(key, value, expected=expected[side])
                    )
                    outcomes[side] = ("ok", rev)
                except Exception as exc:
                    outcomes[side] = ("error", exc)
            kinds = {side: o[0] for side, o in outcomes.items()}
            if kinds["oracle"] == kinds["subject"] == "ok":
                self.writes[key] = ordinal = self.writes.get(key, 0) + 1
                for side, (_kind, rev) in outcomes.items():
                    assert all(rev > old for old in known[side]), (side, rev, known[side])
                    self.revisions[side].setdefault(key, {})[rev] = ordinal
                return
            self.same(outcomes, f"kv.put({key!r}, {value!r}, {which})")

        @rule(name=st.sampled_from(NAMES))
        def kv_get(self, name: str) -> None:
            key = self.ns + name

            async def get(store: Store) -> tuple[bytes, int]:
                entry = await store.kv.get(key)
                return entry.value, entry.revision

            outcomes = self.both(get)
            for side, (kind, result) in list(outcomes.items()):
                if kind == "ok":
                    outcomes[side] = ("ok", (result[0], self.norm_rev(side, key, result[1])))
            self.same(outcomes, f"kv.get({key!r})")

        @rule(name=st.sampled_from(NAMES))
        def kv_delete(self, name: str) -> None:
            key = self.ns + name
            result = self.same(self.both(lambda s: s.kv.delete(key)), f"kv.delete({key!r})")
            if result == ("ok", None):
                for side in self.stores:
                    self.revisions[side].pop(key, None)

        @rule(prefix=st.sampled_from(PREFIXES))
        def kv_keys(self, prefix: str) -> None:
            self.same(self.both(lambda s: s.kv.keys(self.ns + prefix)), f"kv.keys({prefix!r})")

        # --- Blobs --------------------------------------------------------------------

        @rule(name=st.sampled_from(NAMES), data=st.sampled_from(VALUES))
        def blob_put(self, name: str, data: bytes) -> None:
            key = self.ns + name
            self.same(self.both(lambda s: s.blobs.put(key, data)), f"blobs.put({key!r})")

        @rule(name=st.sampled_from(NAMES))
        def blob_get(self, name: str) -> None:
            key = self.ns + name
            self.same(self.both(lambda s: s.blobs.get(key)), f"blobs.get({key!r})")

        @rule(name=st.sampled_from(NAMES))
        def blob_delete(self, name: str) -> None:
            key = self.ns + name
            self.same(self.both(lambda s: s.blobs.delete(key)), f"blobs.delete({key!r})")

        @rule(prefix=st.sampled_from(PREFIXES))
        def blob_list(self, prefix: str) -> None:
            self.same(self.both(lambda s: s.blobs.list(self.ns + prefix)), f"list({prefix!r})")

        # --- Ledger -------------------------------------------------------------------

        @rule(
            name=st.sampled_from(NAMES),
            records=st.lists(st.sampled_from(RECORDS), min_size=1, max_size=3),
            delta=st.sampled_from([0, 0, 0, -1, 1]),
            attach=st.sets(st.sampled_from(range(3)), max_size=3),
            corrupt=st.booleans(),
            refer=st.lists(st.sampled_from(range(len(ATTACHMENT_SEEDS))), max_size=2),
        )
        def ledger_append(
            self,
            name: str,
            records: list[bytes],
            delta: int,
            attach: set[int],
            corrupt: bool,
            refer: list[int],
        ) -> None:
            log = self.ns + name
            tip = (
                self.loop.run_until_complete(self.stores["oracle"].ledger.tip(log))
                if (self.valid(name))
                else 0
            )
            seeds = list(self.attachment_data.items())
            attachments = {seeds[i][0]: seeds[i][1] for i in sorted(attach)}
            if corrupt and attachments and self.valid(name):
                attachments[next(iter(attachments))] = b"not the bytes of this digest"
            expected = max(0, tip + delta)
            refs = [seeds[i][0] for i in refer]
            self.same(
                self.both(
                    lambda s: s.ledger.append(
                        log, records, expected=expected, attachments=attachments, refs=refs
                    )
                ),
                f"ledger.append({log!r}, {records!r}, expected={expected}, {sorted(attach)}, "
                f"refs={refer})",
            )

        @rule(names=st.lists(st.sampled_from(NAMES), max_size=3))
        def ledger_drop(self, names: list[str]) -> None:
            logs = [self.ns + name for name in names]
            self.same(self.both(lambda s: s.ledger.drop(logs)), f"ledger.drop({logs!r})")

        @rule(names=st.lists(st.sampled_from(NAMES), max_size=3))
        def ledger_usage(self, names: list[str]) -> None:
            logs = [self.ns + name for name in names]
            self.same(self.both(lambda s: s.ledger.usage(logs)), f"ledger.usage({logs!r})")

        @rule(dry_run=st.booleans())
        def ledger_sweep(self, dry_run: bool) -> None:
            # The subject's store is shared with earlier examples (other namespaces), so its
            # report counts their attachments too; what it kept of this example's is
            # compared by `ledger_attachments`.
            for outcome in self.both(lambda s: s.ledger.sweep(dry_run=dry_run)).values():
                assert outcome[0] == "ok", outcome

        @rule(
            name=st.sampled_from(NAMES),
            after=st.integers(0, 3),
            limit=st.sampled_from([1, 2, 3, 100, 0]),
        )
        def ledger_read(self, name: str, after: int, limit: int) -> None:
            log = self.ns + name
            if limit == 0 and not self.valid(name):
                limit = 1  # which of two errors comes first is not part of the contract
            self.same(
                self.both(lambda s: s.ledger.read(log, after=after, limit=limit)),
                f"ledger.read({log!r}, after={after}, limit={limit})",
            )

        @rule(name=st.sampled_from(NAMES))
        def ledger_tip(self, name: str) -> None:
            log = self.ns + name
            self.same(self.both(lambda s: s.ledger.tip(log)), f"ledger.tip({log!r})")

        @rule(prefix=st.sampled_from(PREFIXES))
        def ledger_names(self, prefix: str) -> None:
            self.same(self.both(lambda s: s.ledger.names(self.ns + prefix)), f"names({prefix!r})")

        @rule(which=st.lists(st.sampled_from(range(len(ATTACHMENT_SEEDS))), max_size=4))
        def ledger_attachments(self, which: list[int]) -> None:
            digests = [list(self.attachment_data)[i] for i in which]
            self.same(
                self.both(lambda s: s.ledger.attachments(digests)),
                f"ledger.attachments({which})",
            )

    return StoreMatchesOracle


def test_backend_matches_the_memory_oracle(store_url: str) -> None:
    """Random KV/Blobs/Ledger operation sequences give the oracle's results and errors."""
    if store_url.startswith("memory:"):
        pytest.skip("the memory backend is the oracle; comparing it with itself checks nothing")
    run_state_machine_as_test(
        make_machine(store_url),
        settings=settings(
            max_examples=100,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
