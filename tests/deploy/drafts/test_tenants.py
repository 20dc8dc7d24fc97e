"""Drafts never give a tenant more than its session: a capability is a registered source
the session may see (another session's is source_missing, as an unknown name is), drafts
are the session's own, and no draft tool starts or contacts a source (a launcher that
counts its starts is started only by the operator's probe)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from flowledger.deploy import DeployService
from flowledger.deploy.drafts.errors import DraftContractError, DraftNotFoundError
from flowledger.deploy.drafts.service import DraftService
from flowledger.deploy.registry.access import SourceAccess
from flowledger.deploy.registry.errors import SourceNotRegisteredError
from flowledger.deploy.registry.store import SourceRegistry
from flowledger.storage import open_store
from flowledger.workflows import Catalog
from flowledger.workflows.runtime.session import WorkflowSession

from ..test_registered_runs import marked_server, starts

A = str(uuid.UUID(int=21, version=4))
B = str(uuid.UUID(int=22, version=4))


async def test_a_tenant_drafts_only_with_what_its_session_sees(tmp_path: Path) -> None:
    script, marker = marked_server(tmp_path)
    async with open_store(f"sqlite:///{tmp_path / 'tenants.db'}") as store:
        registry = SourceRegistry.over(store)
        await registry.add(
            {
                "format": "flowledger.source/v1",
                "name": "env",
                "stdio": {"command": str(script), "env": {"LABEL": "a"}},
                "sessions": [A],
            }
        )
        assert (await registry.probe("env", {}, seconds=60)).ok  # the operator's probe
        assert starts(marker) == 1

        def tenant(session: str) -> DraftService:
            built = WorkflowSession.build(store, session, Catalog())
            return DraftService(DeployService(built, access=SourceAccess.TENANT))

        a, b = tenant(A), tenant(B)
        made = await a.create("who", {"source": "env", "tool": "whoami"})
        assert made["valid"], made["diagnostics"]
        added = await a.add_tool("who", 1, "env", "secret_digest", assign={})
        checked = await a.validate("who")
        assert checked["bindings"] == [], checked
        published = await a.publish("who", added["revision"], "1", deploy=True)
        assert published["deployment"]["checked_against"] == {
            "env": {"source": "env", "revision": 1}
        }

        with pytest.raises(SourceNotRegisteredError) as hidden:
            await b.create("who", {"source": "env", "tool": "whoami"})
        with pytest.raises(SourceNotRegisteredError) as unknown:
            await b.create("who", {"source": "nothing", "tool": "whoami"})
        assert hidden.value.code == unknown.value.code == "source_missing"
        with pytest.raises(DraftNotFoundError):
            await b.get("who")
        # B copies A's document and binds A's source: refused, nothing saved
        await b.create("copy")
        await b.patch("copy", 1, [{"op": "replace", "path": "", "value": added["document"]}])
        copied = await b.get("copy")
        assert [item["code"] for item in copied["diagnostics"]] == ["binding_missing"]
        with pytest.raises(DraftContractError) as refused:
            await b.publish("copy", 2, "1", deploy=True, bindings={"env": "env"})
        assert [item["code"] for item in refused.value.diagnostics] == ["source_missing"]
        # nothing of the hidden source's probe is read or shown
        assert "lists" not in str(refused.value) and "fingerprint" not in str(refused.value)
        seen = await b.validate("copy", bindings={"env": "env"})
        assert [item["code"] for item in seen["diagnostics"]] == ["source_missing"]
        assert seen["capabilities"] == [] and "lists" not in str(seen)
        assert (await b.deploy.artifact_list())["artifacts"] == []
        assert starts(marker) == 1  # no draft tool started the source
