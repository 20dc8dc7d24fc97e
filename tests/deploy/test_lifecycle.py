"""Deleting artifacts and deployments, rolling back, and paged lists through
`DeployService` (the Python front door) on memory, SQLite and PostgreSQL: a referenced
artifact is refused with the referrers named and nothing written; a rollback makes an
earlier revision live under compare-and-swap; a deletion survives reopening the
database; a deleted deployment's name numbers its revisions after the old ones."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from flowledger.deploy import (
    ArtifactInUseError,
    ArtifactNotFoundError,
    DeploymentConflictError,
    DeploymentCorruptError,
    DeploymentNotFoundError,
    DeployService,
)
from flowledger.deploy.drafts.explain import explain
from flowledger.deploy.drafts.service import DraftService
from flowledger.storage import Store, open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from .conftest import APPROVAL, BRIEFING, minimal
from .test_deployments import document

SESSION = str(uuid.UUID(int=31, version=4))


def service(store: Store) -> DeployService:
    return DeployService(WorkflowSession.build(store, SESSION, Catalog()))


def deployment(name: str, artifact: str, version: str) -> dict[str, Any]:
    return document(name=name, artifact={"name": artifact, "version": version})


async def everything(store: Store) -> tuple[dict[str, bytes], list[str]]:
    keys = {k: (await store.kv.get(k)).value for k in await store.kv.keys("")}
    return keys, sorted(await store.blobs.list(""))


async def test_delete_and_rollback_on_every_backend(store_url: str) -> None:
    async with open_store(store_url) as store:
        deploy = service(store)
        await deploy.artifact_save(APPROVAL)
        await deploy.artifact_save(BRIEFING)  # pins approval@1.0.0 as a child
        await deploy.artifact_save(minimal())
        await deploy.artifact_save(minimal(version="2"))
        first = await deploy.deployment_save(deployment("weather_prod", "minimal", "1"))
        second = await deploy.deployment_save(deployment("weather_prod", "minimal", "2"))
        assert (first["revision"], second["revision"]) == (1, 2)

        # refused while referenced: the referrers named, nothing written
        before = await everything(store)
        with pytest.raises(ArtifactInUseError) as child:
            await deploy.artifact_delete("approval", "1.0.0")
        assert child.value.code == "artifact_in_use"
        assert child.value.referrers == ("artifact city_briefing@1.0.0",)
        with pytest.raises(ArtifactInUseError) as old:  # revision 1 is not live: still kept
            await deploy.artifact_delete("minimal", "1")
        assert old.value.referrers == ("deployment weather_prod (revision 1)",)
        assert "weather_prod (revision 1)" in str(old.value)
        with pytest.raises(ArtifactNotFoundError):
            await deploy.artifact_delete("nothing", "1")
        with pytest.raises(DeploymentNotFoundError) as missing:
            await deploy.deployment_delete("nothing_here")
        assert missing.value.code == "deployment_missing"
        assert await everything(store) == before

        # rollback: compare-and-swap on the live revision; the old revision is live again
        with pytest.raises(DeploymentConflictError) as stale:
            await deploy.deployment_rollback("weather_prod", live=1)
        assert stale.value.code == "deployment_conflict"
        with pytest.raises(ValueError, match="below the live one"):
            await deploy.deployment_rollback("weather_prod", live=2, revision=2)
        with pytest.raises(DeploymentNotFoundError):
            await deploy.deployment_rollback("nothing_here", live=1)
        assert await everything(store) == before
        rolled = await deploy.deployment_rollback("weather_prod", live=2)
        assert (rolled["revision"], rolled["live"], rolled["previous"]) == (1, True, 2)
        assert rolled["artifact"] == {"name": "minimal", "version": "1"}
        assert (await deploy.deployment_show("weather_prod"))["revision"] == 1
        with pytest.raises(DeploymentNotFoundError):  # nothing below revision 1
            await deploy.deployment_rollback("weather_prod", live=1)
        third = await deploy.deployment_save(deployment("weather_prod", "minimal", "2"))
        assert third["revision"] == 3  # numbers after the highest, not after live

        # delete the deployment, then what it kept
        deleted = await deploy.deployment_delete("weather_prod")
        assert deleted == {"name": "weather_prod", "deleted": True, "revisions": [1, 2, 3]}
        assert (await deploy.artifact_delete("minimal", "1"))["deleted"] is True
        await deploy.artifact_delete("city_briefing", "1.0.0")
        await deploy.artifact_delete("approval", "1.0.0")

        if store_url != "memory://":  # durable: a new connection sees the same
            await reopened_sees_the_deletion(store_url)
        else:
            await sees_the_deletion(deploy)


async def reopened_sees_the_deletion(store_url: str) -> None:
    async with open_store(store_url) as store:
        await sees_the_deletion(service(store))


async def sees_the_deletion(deploy: DeployService) -> None:
    """What `test_delete_and_rollback_on_every_backend` deleted stays deleted."""
    assert await deploy.deployment_list() == {"deployments": [], "next": None}
    with pytest.raises(DeploymentNotFoundError):
        await deploy.deployment_show("weather_prod", 1)
    listed = await deploy.artifact_list()
    assert [(a["name"], [v["version"] for v in a["versions"]]) for a in listed["artifacts"]] == [
        ("minimal", ["2"])
    ]
    with pytest.raises(ArtifactNotFoundError):
        await deploy.artifact_show("approval", "1.0.0")
    again = await deploy.deployment_save(deployment("weather_prod", "minimal", "2"))
    assert again["revision"] == 4  # a run's version r1..r3 never names a new revision
    assert (await deploy.deployment_check("weather_prod"))["revision"] == 4


async def test_a_stale_deployment_reference_does_not_keep_an_artifact(store: Store) -> None:
    """A crash after a deployment's revisions were deleted but before its references
    went: the artifact's delete clears the stale reference."""
    deploy = service(store)
    await deploy.artifact_save(minimal())
    await deploy.deployment_save(deployment("crashed", "minimal", "1"))
    base = f"sessions/{SESSION}/deploy/deployments"
    for key in await store.kv.keys(f"{base}/revisions/crashed/"):
        await store.kv.delete(key)
    await store.kv.delete(f"{base}/live/crashed")
    assert await deploy.artifacts.references(SESSION, "minimal", "1") != []
    assert (await deploy.artifact_delete("minimal", "1"))["deleted"] is True
    assert await deploy.artifacts.references(SESSION, "minimal", "1") == []


async def test_lists_page_by_name_with_a_query(store: Store) -> None:
    deploy = service(store)
    drafts = DraftService(deploy)
    names = ["alpha", "alpine", "beta", "gamma_alp", "omega"]
    for name in names:
        await deploy.artifact_save(minimal(name=name))
        await deploy.deployment_save(deployment(f"{name}_dep", name, "1"))
        await drafts.create(f"{name}_draft")

    async def pages(list_: Any, key: str, field: str, **query: Any) -> list[list[str]]:
        found, cursor = [], None
        while True:
            page = await list_(cursor=cursor, **query)
            found.append([item[field] for item in page[key]])
            if page["next"] is None:
                return found
            assert page["next"] == page[key][-1][field]
            cursor = page["next"]

    assert await pages(deploy.artifact_list, "artifacts", "name", limit=2) == [
        ["alpha", "alpine"],
        ["beta", "gamma_alp"],
        ["omega"],
    ]
    assert await pages(deploy.artifact_list, "artifacts", "name", query="alp", limit=2) == [
        ["alpha", "alpine"],
        ["gamma_alp"],
    ]
    assert await pages(deploy.deployment_list, "deployments", "name", query="alp") == [
        ["alpha_dep", "alpine_dep", "gamma_alp_dep"]
    ]
    assert await pages(drafts.list, "drafts", "draft", query="ga", limit=1) == [
        ["gamma_alp_draft"],
        ["omega_draft"],
    ]
    # a cursor past a deleted name continues after it; nothing is skipped or repeated
    first = await deploy.deployment_list(limit=2)
    await deploy.deployment_delete("alpine_dep")
    rest = await deploy.deployment_list(limit=10, cursor=first["next"])
    assert [d["name"] for d in rest["deployments"]] == ["beta_dep", "gamma_alp_dep", "omega_dep"]
    assert (await deploy.deployment_list(query="zzz")) == {"deployments": [], "next": None}
    # a name whose every version is deleted is passed over
    await deploy.deployment_delete("beta_dep")
    await deploy.artifact_delete("beta", "1")
    assert await pages(deploy.artifact_list, "artifacts", "name", limit=2) == [
        ["alpha", "alpine"],
        ["gamma_alp", "omega"],
    ]
    for bad in ({"limit": 0}, {"limit": 501}, {"cursor": ""}, {"query": "x" * 65}):
        with pytest.raises(ValueError):
            await deploy.artifact_list(**bad)


def test_the_new_codes_are_explained() -> None:
    for code in ("deployment_in_use", "deployment_conflict", "deployment_corrupt"):
        assert explain(code)["code"] == code


async def test_racing_rollbacks_and_deletes_leave_one_winner(store: Store) -> None:
    """Two rollbacks from the same live revision: one moves it, the other is refused.
    A delete racing a save that names the artifact: never both succeed."""
    deploy = service(store)
    await deploy.artifact_save(minimal())
    for _ in range(3):
        await deploy.deployment_save(deployment("raced", "minimal", "1"))
    outcomes = await asyncio.gather(
        deploy.deployment_rollback("raced", live=3),
        deploy.deployment_rollback("raced", live=3, revision=1),
        return_exceptions=True,
    )
    won = [item for item in outcomes if isinstance(item, dict)]
    lost = [item for item in outcomes if isinstance(item, DeploymentConflictError)]
    assert (len(won), len(lost)) == (1, 1), outcomes
    assert (await deploy.deployment_show("raced"))["revision"] == won[0]["revision"]

    await deploy.deployment_delete("raced")
    await deploy.artifact_save(minimal(version="2"))
    saved, deleted = await asyncio.gather(
        deploy.deployment_save(deployment("raced", "minimal", "2")),
        deploy.artifact_delete("minimal", "2"),
        return_exceptions=True,
    )
    assert isinstance(saved, dict) != isinstance(deleted, dict), (saved, deleted)
    if isinstance(saved, dict):  # the deployment won: the artifact is kept
        assert isinstance(deleted, ArtifactInUseError)
        assert (await deploy.artifact_show("minimal", "2"))["version"] == "2"


async def test_a_damaged_deployment_record_is_a_typed_error(store: Store) -> None:
    deploy = service(store)
    await deploy.artifact_save(minimal())
    await deploy.deployment_save(deployment("damaged", "minimal", "1"))
    key = f"sessions/{SESSION}/deploy/deployments/live/damaged"
    entry = await store.kv.get(key)
    await store.kv.put(key, b'{"revision": "one"}', expected=entry.revision)
    with pytest.raises(DeploymentCorruptError) as caught:
        await deploy.deployment_show("damaged")
    assert caught.value.code == "deployment_corrupt"
    assert explain("deployment_corrupt")["code"] == "deployment_corrupt"
