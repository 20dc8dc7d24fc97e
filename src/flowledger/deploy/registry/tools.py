"""`CapabilityTools`: the capability catalog's tools for one session, transport neutral
(JSON arguments in, a JSON result out, `flowledger.tools.ToolError` on any failure),
served beside `DeployTools` by the MCP server (and held by the dashboard's sessions).

| tool | mutating | arguments |
| --- | --- | --- |
| ``capability_list`` | no | ``query?``, ``source?``, ``cursor?``, ``limit?``, ``refresh?`` |
| ``capability_inspect`` | no | ``source``, ``tool``, ``refresh?`` |
| ``capability_call`` | yes | ``source``, ``tool``, ``arguments`` (an object), ``timeout?`` |
| ``capability_audit`` | no | ``cursor?``, ``limit?`` (1-100, default 50) |

Everything is limited to the sources the session may see and that are enabled; a
source it may not see answers exactly like one that does not exist
(``source_missing``). ``capability_list`` and ``capability_inspect`` read listings
from the catalog (`CapabilityCatalog`: cached probes, refreshed when due where the
door may start processes); ``capability_call`` is `ToolTrial` (read-only tools, or the
source's ``call_tools``; audited) and, since it starts a process or opens a
connection, a read-only server hides it. ``capability_audit`` reads the session's own
audit log, never another session's.

A failing call's message starts with its ``code`` in brackets (``[source_missing]``,
``[call_refused]``, ``[tool_missing]``, ``[tool_arguments_invalid]``, ``[tool_timeout]``,
``[cursor_stale]``, ...), as the draft tools' do, which ``explain`` answers; the typed
error is the `ToolError`'s ``cause``.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

from ... import storage
from ...tools import ToolError
from ...tools.table import TableTools
from ..sources.errors import SourceError, ToolNotFoundError, clip
from .access import SessionSources, SourceAccess
from .audit import MAX_AUDIT_PAGE, CallAudit
from .calls import MAX_CALL_TIMEOUT, ToolTrial, may_call
from .catalog import (
    CapabilityCatalog,
    Found,
    Listing,
    NoListingError,
    catalog_for,
    generation_of,
)
from .examples import example_arguments
from .spec import CredentialMissingError
from .store import RegisteredSource, SourceRegistry

__all__ = ["CAPABILITY_TOOL_NAMES", "MAX_DESCRIPTION_CHARS", "CapabilityTools", "CursorError"]

MAX_DESCRIPTION_CHARS: Final = 300
MAX_PAGE: Final = 100
MAX_QUERY_CHARS: Final = 512
_NAME: Final = {"type": "string", "minLength": 1, "maxLength": 128}
_CURSOR: Final = {"type": "string", "maxLength": 512}


def _schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_TOOLS: Final[dict[str, tuple[str, dict[str, Any], bool]]] = {
    "capability_list": (
        "Search the tools of the MCP sources registered for this session (ranked full-text "
        "search over tool names, titles, descriptions and parameter names), or list them "
        "all without a query. Each result: source, tool, title, description, read_only, "
        "idempotent, callable (by capability_call), contract fingerprint and score; "
        "'sources' says how fresh each source's listing is. refresh: true probes the "
        "sources again (where this server may).",
        _schema(
            {
                "query": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                "source": _NAME,
                "cursor": _CURSOR,
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
                "refresh": {"type": "boolean"},
            }
        ),
        False,
    ),
    "capability_inspect": (
        "One tool of a registered source: input and output schemas, annotations, both "
        "fingerprints, whether capability_call may try it, and an example argument object "
        "generated from its input schema.",
        _schema(
            {"source": _NAME, "tool": _NAME, "refresh": {"type": "boolean"}}, ["source", "tool"]
        ),
        False,
    ),
    "capability_call": (
        "Try a tool of a registered source: allowed for tools annotated read-only (or that "
        "the operator allows in the source's call_tools), refused otherwise with nothing "
        "sent. Arguments are checked against the tool's input schema first. Bounded by "
        "timeouts; recorded in this session's audit log (never the arguments or result).",
        _schema(
            {
                "source": _NAME,
                "tool": _NAME,
                "arguments": {"type": "object"},
                "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_CALL_TIMEOUT},
            },
            ["source", "tool", "arguments"],
        ),
        True,
    ),
    "capability_audit": (
        "This session's capability_call audit log, oldest first: when, which source, "
        "revision and tool, outcome, error code and duration (never arguments or results).",
        _schema(
            {
                "cursor": _CURSOR,
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_AUDIT_PAGE},
            }
        ),
        False,
    ),
}
CAPABILITY_TOOL_NAMES: Final = tuple(_TOOLS)


class CursorError(ValueError):
    """A cursor that is not one of this tool's, or that the listings moved past."""

    def __init__(self, message: str, code: str = "cursor_invalid") -> None:
        super().__init__(message)
        self.code = code


class CapabilityTools(TableTools):
    """The capability tools of one session (see the module)."""

    table = _TOOLS
    expected = (SourceError, CredentialMissingError, CursorError, ValueError)

    def __init__(
        self,
        sources: SessionSources,
        audit: CallAudit,
        *,
        catalog: CapabilityCatalog | None = None,
        trial: ToolTrial | None = None,
    ) -> None:
        self.sources = sources
        self.audit = audit
        self.catalog = catalog if catalog is not None else CapabilityCatalog()
        self.trial = trial if trial is not None else ToolTrial(sources, self.catalog, audit)
        self.handlers = {
            "capability_list": self._list,
            "capability_inspect": self._inspect,
            "capability_call": self._call,
            "capability_audit": self._audit,
        }

    @classmethod
    def over(
        cls,
        store: storage.Store,
        session_id: str,
        *,
        access: SourceAccess = SourceAccess.OPERATOR,
        transport: str,
    ) -> CapabilityTools:
        """The tools of ``session_id`` in ``store``, with this process's catalog of that
        database (`catalog_for`); ``transport`` names the door in audit records."""
        sources = SessionSources(SourceRegistry.over(store), session_id, access)
        return cls(
            sources, CallAudit(store.ledger, session_id, transport), catalog=catalog_for(store)
        )

    def failure(self, name: str, exc: Exception) -> ToolError:
        if isinstance(exc, CredentialMissingError):
            return ToolError(f"{name}: [credential_missing] {exc}", cause=exc)
        return super().failure(name, exc)

    # -- capability_list ----------------------------------------------------------------

    async def _listings(
        self, names: Sequence[RegisteredSource], refresh: bool
    ) -> builtins.list[Listing]:
        return await self.catalog.listings(
            self.sources.registry,
            names,
            environ=self.sources.environ,
            launch=self.sources.access.launch,
            refresh=refresh,
        )

    async def _list(self, arguments: dict[str, Any]) -> dict[str, Any]:
        query = arguments.get("query")
        query = query if isinstance(query, str) and query.strip() else None
        limit = int(arguments.get("limit", 20))
        if "source" in arguments:
            chosen = [await self.sources.enabled(arguments["source"])]
        else:
            chosen = await self.sources.list()
        listings = await self._listings(chosen, bool(arguments.get("refresh", False)))
        generation = generation_of(listings)
        scope = _scope(query, arguments.get("source"), listings)
        offset = _read_cursor(arguments.get("cursor"), scope, generation)
        by_name = {item.name: item for item in chosen}
        if query is None:
            everything = [
                Found(item.source, tool, None)
                for item in sorted(listings, key=lambda i: i.source)
                for tool in sorted(item.tools, key=lambda t: t.name)
            ]
            page, total = everything[offset : offset + limit], len(everything)
        else:
            page, total = await self.catalog.search(
                listings, query, offset=offset, limit=limit, generation=generation
            )
        following = offset + len(page)
        answer: dict[str, Any] = {
            "query": query,
            "results": [_result(found, by_name[found.source]) for found in page],
            "total": total,
            "next_cursor": _cursor(scope, generation, following) if following < total else None,
            "sources": [item.to_json() for item in listings],
        }
        if not self.sources.access.launch:
            answer["note"] = (
                "this server starts and contacts no source: listings are the registry's "
                "last probes, not refreshed"
            )
        return answer

    # -- capability_inspect -------------------------------------------------------------

    async def _inspect(self, arguments: dict[str, Any]) -> dict[str, Any]:
        registered = await self.sources.enabled(arguments["source"])
        (listing,) = await self._listings([registered], bool(arguments.get("refresh", False)))
        tool = listing.tool(arguments["tool"])
        if tool is None:
            if listing.probe is None:
                raise NoListingError(listing)
            raise ToolNotFoundError(
                registered.name, arguments["tool"], tuple(t.name for t in listing.tools)
            )
        callable_ = may_call(registered, tool)
        if tool.read_only:
            why = "the server annotates it read-only"
        elif callable_:
            why = "the operator allows it (the source's call_tools)"
        else:
            why = "not annotated read-only and not on the source's call_tools"
        return {
            "source": registered.name,
            "revision": registered.revision,
            "listing": listing.to_json(),
            "tool": tool.to_json(),
            "callable": callable_,
            "callable_because": why,
            "example": example_arguments(tool.input_schema).to_json(),
        }

    # -- capability_call ----------------------------------------------------------------

    async def _call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.trial.call(
            arguments["source"],
            arguments["tool"],
            arguments["arguments"],
            timeout=arguments.get("timeout"),
        )

    # -- capability_audit ---------------------------------------------------------------

    async def _audit(self, arguments: dict[str, Any]) -> dict[str, Any]:
        cursor = arguments.get("cursor")
        after = 0
        if cursor is not None:
            if not cursor.isdigit() or len(cursor) > 18:
                raise CursorError("capability_audit: the cursor is not one this tool gave")
            after = int(cursor)
        entries, following = await self.audit.read(
            after=after, limit=int(arguments.get("limit", 50))
        )
        return {
            "entries": [entry.to_json() for entry in entries],
            "next_cursor": None if following is None else str(following),
        }


def _result(found: Found, registered: RegisteredSource) -> dict[str, Any]:
    tool = found.tool
    description = tool.description
    return {
        "source": found.source,
        "tool": tool.name,
        "title": tool.title,
        "description": None if description is None else clip(description, MAX_DESCRIPTION_CHARS),
        "read_only": tool.read_only,
        "idempotent": tool.idempotent,
        "callable": may_call(registered, tool),
        "contract_fingerprint": tool.contract_fingerprint,
        "score": None if found.score is None else round(found.score, 4),
    }


def _scope(query: str | None, source: Any, listings: Sequence[Listing]) -> str:
    """Which question a cursor belongs to (query, source, the sources asked)."""
    names = ",".join(sorted(item.source for item in listings))
    text = json.dumps([query, source, names])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cursor(scope: str, generation: str, offset: int) -> str:
    data = json.dumps({"s": scope, "g": generation, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def _read_cursor(cursor: Any, scope: str, generation: str) -> int:
    if cursor is None:
        return 0
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        offset = data["o"]
        if not isinstance(offset, int) or offset < 0 or data["s"] != scope:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise CursorError(
            "capability_list: the cursor is not one this tool gave for this query and source"
        ) from None
    if data["g"] != generation:
        raise CursorError(
            "capability_list: the listings changed since this cursor was made; list again "
            "without a cursor",
            "cursor_stale",
        )
    return offset
