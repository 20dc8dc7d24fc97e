"""Who may do what with sources: `SourceAccess` (a door's policy) and `SessionSources`
(the registry as one session sees it under that policy).

The trust model (docs/sources.md): sources belong to the operator. The operator acts
through the CLI, files and a stdio MCP server it starts itself (`SourceAccess.OPERATOR`:
inline command lines and URLs allowed). A client of an HTTP server (MCP or dashboard),
tokens or not, is a *tenant* (`SourceAccess.TENANT`): it reaches processes and addresses
only through sources the operator registered and made visible to its session, and their
secrets only as the operator granted them; an inline spec is refused
(`InlineSourceRefusedError`) unless the operator started the server with
``--allow-inline-sources`` (`SourceAccess.TENANT_INLINE`). A read-only server never
starts or contacts a source (``launch`` false): it answers from the registry's last
probe and says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..sources.spec import Source
from .errors import InlineSourceRefusedError, LaunchRefusedError, SourceNotRegisteredError
from .spec import CredentialMissingError
from .store import Probe, RegisteredSource, SourceRegistry

__all__ = ["SessionSources", "SourceAccess"]


@dataclass(frozen=True)
class SourceAccess:
    """``inline``: command lines, URLs and environment variables may be named directly
    (an operator's power). ``launch``: sources may be started and contacted at all."""

    inline: bool
    launch: bool

    OPERATOR: ClassVar[SourceAccess]
    TENANT: ClassVar[SourceAccess]
    TENANT_INLINE: ClassVar[SourceAccess]

    def read_only(self) -> SourceAccess:
        """The same policy, without starting or contacting anything."""
        return SourceAccess(self.inline, launch=False)


SourceAccess.OPERATOR = SourceAccess(inline=True, launch=True)
SourceAccess.TENANT = SourceAccess(inline=False, launch=True)
SourceAccess.TENANT_INLINE = SourceAccess(inline=True, launch=True)


class SessionSources:
    """The registered sources ``session_id`` may use, under ``access``; secrets are read
    from ``environ`` (this process's environment by default)."""

    def __init__(
        self,
        registry: SourceRegistry,
        session_id: str,
        access: SourceAccess = SourceAccess.OPERATOR,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.registry = registry
        self.session_id = session_id
        self.access = access
        self._environ = environ

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def check_inline(self, where: str) -> None:
        """`InlineSourceRefusedError` unless inline specs are allowed here."""
        if not self.access.inline:
            raise InlineSourceRefusedError(where)

    async def get(self, name: str, revision: int | None = None) -> RegisteredSource:
        """Revision ``revision`` (default: current) of a source this session may see,
        enabled or not; `SourceNotRegisteredError` for one it may not see."""
        registered = await self.registry.get(name, revision)
        if not registered.source.visible_to(self.session_id):
            raise SourceNotRegisteredError(name, revision)
        return registered

    async def enabled(self, name: str, revision: int | None = None) -> RegisteredSource:
        registered = await self.get(name, revision)
        return await self.registry.enabled(name, registered.revision)

    async def list(self, *, include_disabled: bool = False) -> list[RegisteredSource]:
        """The sources this session may see (enabled ones unless asked otherwise)."""
        return [
            item
            for item in await self.registry.list()
            if item.source.visible_to(self.session_id) and (include_disabled or item.enabled)
        ]

    def source(self, registered: RegisteredSource, dependency: str) -> Source:
        """The concrete source of ``registered`` for this session, with the secrets it is
        granted; `CredentialMissingError` naming ``dependency`` and why otherwise."""
        missing = registered.source.missing_secret(self.session_id, self.environ)
        if missing is not None:
            raise CredentialMissingError(dependency, *missing)
        return registered.source.source(self.session_id, self.environ)

    async def last_probe(self, name: str) -> Probe | None:
        await self.get(name)
        return await self.registry.last_probe(name)

    async def probe(self, name: str, *, seconds: float) -> Probe:
        """Probe a visible, enabled source now (`SourceRegistry.probe`); refused on a
        door that starts nothing."""
        await self.enabled(name)
        if not self.access.launch:
            raise LaunchRefusedError(name)
        return await self.registry.probe(name, self.environ, seconds=seconds)
