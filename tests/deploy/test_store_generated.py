"""Generated bad artifacts never write anything (on the memory store, which the storage
conformance suite holds every backend to)."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger.deploy import ArtifactStore, ArtifactValidationError
from flowledger.storage import open_store

from .conftest import APPROVAL, briefing_data
from .test_validate import ALL_PATHS, EXPRESSIONS, JSON, PLACE

BASE = briefing_data()
SESSION = str(uuid.uuid4())


async def _save_refused_or_valid(data: dict[str, Any]) -> None:
    async with open_store("memory://") as store:
        artifacts = ArtifactStore.over(store)
        await artifacts.save(SESSION, APPROVAL)
        keys, blobs = await store.kv.keys(""), await store.blobs.list("")
        try:
            await artifacts.save(SESSION, data)
        except ArtifactValidationError as exc:
            assert all(PLACE.fullmatch(issue.place) for issue in exc.issues)
            assert await store.kv.keys("") == keys
            assert await store.blobs.list("") == blobs
            return
        saved = await artifacts.get(SESSION, data["name"], data["version"])
        assert saved.record.children[0].name == "approval"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(ALL_PATHS), st.one_of(JSON, EXPRESSIONS)),
        min_size=1,
        max_size=3,
    )
)
def test_a_refused_save_writes_nothing(mutations: list[tuple[tuple[Any, ...], Any]]) -> None:
    data = copy.deepcopy(BASE)
    for path, value in mutations:
        target: Any = data
        try:
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    asyncio.run(_save_refused_or_valid(data))
