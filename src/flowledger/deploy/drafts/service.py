"""`DraftService`: a session's drafts, their edits and publishing, as JSON in and out.

It serves `DraftTools` and reads what a `DeployService` of the same session holds: the
artifact store (a draft from a saved version; publishing saves one), the registered
sources the session may see and their last probes (capabilities), and the deployments.
Nothing here starts or contacts a source: a capability's tools are those of its
source's last successful probe (the operator probes).

Every edit stores the draft with the diagnostics of `check`: the artifact's own checks,
and once they pass, the checks against the catalog with the draft's bindings
(`flowledger.deploy.drafts.contracts`), whose capabilities (tool, source, probe
revision, contract fingerprint) are recorded on the draft.

Publishing (`publish`): the draft at ``revision`` gets ``version`` and must validate
(`DraftInvalidError` with every issue otherwise, nothing saved), and pass the checks
against the catalog now, with its bindings (``bindings`` adds or overrides), a recorded
capability whose contract fingerprint changed since being ``contract_changed``
(`DraftContractError` with every diagnostic otherwise, nothing saved). It is saved as an
immutable artifact version (children pinned by `ArtifactStore.save`). With ``deploy``,
a deployment (``deployment``, default the artifact's name) binding each dependency as
``source: NAME`` with ``allow_tools`` the tools the artifact uses from it is saved and
made live. The answer lists the capabilities checked (``checked``, with their
fingerprints) and, with a deployment, per dependency the probe revision it was checked
against.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..artifacts.errors import ArtifactValidationError
from ..artifacts.validate import validate_artifact
from ..deployments.document import DEPLOYMENT_FORMAT, validate_deployment
from ..deployments.service import DeployService
from ..listing import page_names
from ..registry.store import Probe
from ..sources.tool_info import ToolInfo
from .contracts import check_contracts
from .diagnostics import Diagnosis, diagnose
from .edits import add_tool_operations, connect_operations, set_output_operations
from .errors import (
    CapabilityMissingError,
    DraftConflictError,
    DraftContractError,
    DraftInvalidError,
    EditInvalidError,
    ProbeMissingError,
)
from .patch import apply_patch
from .record import Draft
from .skeleton import capability_document, identifier, skeleton
from .store import DraftStore

__all__ = ["DraftService"]


def _answer(draft: Draft, **extra: Any) -> dict[str, Any]:
    shown = draft.to_json()
    shown.update(extra)
    return shown


class DraftService:
    """The drafts of ``deploy``'s session."""

    def __init__(self, deploy: DeployService) -> None:
        self.deploy = deploy
        self.store = DraftStore(deploy.session.store.kv, self.check)

    @property
    def _sid(self) -> str:
        return self.deploy.session.session_id

    # -- capabilities -----------------------------------------------------------------

    async def _probe(self, source: str) -> Probe:
        """The last successful probe of ``source``, which the session must see
        (``source_missing``) and the operator must not have disabled (``source_disabled``:
        a deployment could not use it)."""
        await self.deploy.sources.enabled(source)
        probe = await self.deploy.sources.last_probe(source)
        if probe is None:
            raise ProbeMissingError(source, "was never probed")
        if not probe.ok:
            raise ProbeMissingError(source, f"failed its last probe ({(probe.error or '')[:200]})")
        return probe

    async def capability(self, source: str, tool: str) -> tuple[ToolInfo, Probe]:
        """``tool`` of registered ``source`` as its last successful probe lists it."""
        probe = await self._probe(source)
        for info in probe.tools:
            if info.name == tool:
                return info, probe
        raise CapabilityMissingError(source, tool, [info.name for info in probe.tools])

    # -- the drafts -------------------------------------------------------------------

    async def create(self, name: str, origin: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A new draft: from nothing (a valid skeleton), a capability (``{source,
        tool}``) or a saved artifact version (``{artifact, version}``)."""
        DraftStore.check_name(name)
        if not origin:
            draft = await self.store.create(
                self._sid, name, skeleton(name), origin={"kind": "skeleton"}
            )
            return _answer(draft)
        if any(not isinstance(value, str) for value in origin.values()):
            raise ValueError("`from` holds strings: {source, tool} or {artifact, version}")
        if set(origin) == {"source", "tool"}:
            info, probe = await self.capability(origin["source"], origin["tool"])
            dependency = identifier(origin["source"])
            draft = await self.store.create(
                self._sid,
                name,
                capability_document(name, dependency, info),
                bindings={dependency: origin["source"]},
                origin={
                    "kind": "capability",
                    "source": origin["source"],
                    "tool": info.name,
                    "probe_revision": probe.revision,
                },
            )
            return _answer(draft)
        if set(origin) == {"artifact", "version"}:
            stored = await self.deploy.artifacts.get(
                self._sid, origin["artifact"], origin["version"]
            )
            draft = await self.store.create(
                self._sid,
                name,
                json.loads(stored.canonical),
                origin={
                    "kind": "artifact",
                    "artifact": stored.record.name,
                    "version": stored.record.version,
                    "digest": stored.record.digest,
                },
            )
            return _answer(draft)
        raise ValueError("`from` is {source, tool} (a capability) or {artifact, version}")

    async def get(self, name: str) -> dict[str, Any]:
        return _answer(await self.store.get(self._sid, name))

    async def list(
        self, *, query: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """A page of the session's drafts by name (``query``: a substring of the name;
        ``cursor``: the previous page's ``next``, None on the last page)."""
        drafts = {draft.name: draft for draft in await self.store.list(self._sid)}
        page = page_names(drafts, query=query, limit=limit, cursor=cursor)
        return {"drafts": [drafts[name].summary() for name in page.names], "next": page.next}

    async def delete(self, name: str, revision: int | None = None) -> dict[str, Any]:
        deleted = await self.store.delete(self._sid, name, revision)
        return {"draft": name, "deleted": True, "revision": deleted}

    async def patch(self, name: str, revision: int, operations: Sequence[Any]) -> dict[str, Any]:
        return _answer(await self.store.patch(self._sid, name, revision, operations))

    # -- focused edits ----------------------------------------------------------------

    async def add_tool(
        self,
        name: str,
        revision: int,
        source: str,
        tool: str,
        *,
        node: str | None = None,
        dependency: str | None = None,
        after: str | None = None,
        next: str | None = None,
        assign: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        info, _probe = await self.capability(source, tool)
        applied: dict[str, Any] = {}

        def change(draft: Draft) -> tuple[Any, Mapping[str, str]]:
            chosen = dependency
            if chosen is None:
                bound = [dep for dep, src in sorted(draft.bindings.items()) if src == source]
                chosen = bound[0] if bound else identifier(source)
            if draft.bindings.get(chosen, source) != source:
                raise EditInvalidError(
                    "draft_add_tool",
                    f"dependency {chosen!r} is bound to source {draft.bindings[chosen]!r}: "
                    "name another `dependency`",
                )
            nodes = draft.document.get("nodes") if isinstance(draft.document, dict) else None
            taken = frozenset(nodes) if isinstance(nodes, dict) else frozenset()
            step = add_tool_operations(
                draft.document,
                node=node if node is not None else identifier(info.name, taken),
                dependency=chosen,
                tool=info,
                after=after,
                next=next,
                assign=assign,
            )
            applied["operations"], applied["unmapped"] = step.operations, step.unmapped
            return apply_patch(draft.document, step.operations), {**draft.bindings, chosen: source}

        draft = await self.store.edit(self._sid, name, revision, change)
        return _answer(draft, applied=applied["operations"], unmapped=applied["unmapped"])

    async def _focused(self, name: str, revision: int, operations_of: Any) -> dict[str, Any]:
        applied: list[dict[str, Any]] = []

        def change(draft: Draft) -> tuple[Any, Mapping[str, str]]:
            applied.extend(operations_of(draft.document))
            return apply_patch(draft.document, applied), draft.bindings

        return _answer(await self.store.edit(self._sid, name, revision, change), applied=applied)

    async def connect(
        self, name: str, revision: int, source: str, target: str, when: str | None = None
    ) -> dict[str, Any]:
        return await self._focused(
            name,
            revision,
            lambda document: connect_operations(document, source=source, target=target, when=when),
        )

    async def set_output(
        self,
        name: str,
        revision: int,
        output: Any,
        *,
        node: str | None = None,
        outcome: str | None = None,
        output_schema: Any = None,
    ) -> dict[str, Any]:
        return await self._focused(
            name,
            revision,
            lambda document: set_output_operations(
                document, output=output, node=node, outcome=outcome, output_schema=output_schema
            ),
        )

    # -- checking and publishing ------------------------------------------------------

    async def check(
        self,
        name: str,
        document: Any,
        bindings: Mapping[str, str],
        revision: int,
        recorded: Sequence[Mapping[str, Any]] = (),
    ) -> Diagnosis:
        """The artifact's own checks, and when they pass the checks against the catalog
        (`check_contracts`) with ``bindings``; ``recorded`` capabilities are compared
        with the probes now (``contract_changed``)."""
        diagnosis = diagnose(document, name, revision)
        if diagnosis.validated is None:
            return diagnosis
        checked = await check_contracts(
            diagnosis.validated,
            bindings,
            self._probe,
            draft=name,
            revision=revision,
            recorded=recorded,
        )
        valid = not checked.diagnostics
        return Diagnosis(
            valid,
            diagnosis.digest if valid else None,
            checked.diagnostics,
            validated=diagnosis.validated,
            capabilities=checked.capabilities,
        )

    async def validate(
        self, name: str, bindings: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """The draft checked now: its artifact, and against the catalog with its bindings
        (``bindings`` adds or overrides), its recorded capabilities compared with the
        sources' probes of the moment; nothing is written. ``bindings`` in the answer
        repeats the diagnostics about the dependencies' sources."""
        draft = await self.store.get(self._sid, name)
        merged = {**draft.bindings, **(bindings or {})}
        diagnosis = await self.check(
            name, draft.document, merged, draft.revision, draft.capabilities
        )
        return {
            "draft": name,
            "revision": draft.revision,
            "valid": diagnosis.valid,
            "diagnostics": list(diagnosis.diagnostics),
            "truncated": diagnosis.truncated,
            "capabilities": list(diagnosis.capabilities),
            "bindings": [
                item for item in diagnosis.diagnostics if item["place"].startswith("dependencies.")
            ],
            "deployable": diagnosis.valid,
        }

    async def publish(
        self,
        name: str,
        revision: int,
        version: str,
        *,
        deploy: bool = False,
        deployment: str | None = None,
        bindings: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """See the module."""
        draft = await self.store.get(self._sid, name)
        if draft.revision != revision:
            raise DraftConflictError(name, revision, draft.revision)
        document = copy.deepcopy(draft.document)
        if isinstance(document, dict):
            document["version"] = version
        try:
            validated = validate_artifact(document)
        except ArtifactValidationError as exc:
            raise DraftInvalidError(name, exc.issues) from None
        merged = {**draft.bindings, **(bindings or {})}
        contracts = await check_contracts(
            validated,
            merged,
            self._probe,
            draft=name,
            revision=revision,
            recorded=draft.capabilities,
        )
        if contracts.diagnostics:
            raise DraftContractError(name, contracts.diagnostics)
        deployment_document: dict[str, Any] | None = None
        checked = {
            item["dependency"]: {"source": item["source"], "revision": item["probe_revision"]}
            for item in contracts.capabilities
        }
        if deploy:
            deployment_document = {
                "format": DEPLOYMENT_FORMAT,
                "name": deployment or validated.name,
                "artifact": {"name": validated.name, "version": validated.version},
                "sources": {
                    dependency: {"source": merged[dependency], "allow_tools": list(declared.tools)}
                    for dependency, declared in validated.artifact.dependencies.items()
                },
            }
            validate_deployment(deployment_document)  # nothing is saved if it is refused
        try:
            record = await self.deploy.artifacts.save(self._sid, validated)
        except ArtifactValidationError as exc:  # children: missing, cyclic, not matching
            raise DraftInvalidError(name, exc.issues) from None
        answer: dict[str, Any] = {
            "draft": name,
            "revision": revision,
            "checked": list(contracts.capabilities),
            "artifact": {
                "name": record.name,
                "version": record.version,
                "digest": record.digest,
                "closure_digest": record.closure_digest,
                "children": [pin.to_json() for pin in record.children],
            },
        }
        if deployment_document is not None:
            saved = await self.deploy.deployment_save(deployment_document)
            answer["deployment"] = {
                "name": saved["name"],
                "revision": saved["revision"],
                "live": saved["live"],
                "digest": saved["digest"],
                "checked_against": checked,
            }
        return answer
