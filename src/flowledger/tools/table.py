"""`TableTools`: a tool bundle described by a table of ``name -> (description, JSON
Schema, mutating)``, with one handler per tool.

The deploy layer's bundles (deployments, drafts, capabilities) share one behaviour, kept
here: ``infos`` publishes a fresh copy of every schema; ``call`` refuses an unknown name,
reads the arguments (a mapping, or JSON text) and checks them against the tool's schema
(`ToolError` naming the first wrong field, by JSON path), runs the handler, and turns
the failures a bundle expects (``expected``) into a `ToolError` through ``failure``
(by default ``"<tool>: [<code>] <message>"`` when the error has a ``code``). Anything
else propagates: the transport decides how an unexpected exception reads.
"""

from __future__ import annotations

import builtins
import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

import jsonschema  # type: ignore[import-untyped, unused-ignore]

from .bundle import ToolInfo
from .errors import ToolError

__all__ = ["Handler", "TableTools", "ToolTable"]

#: ``name -> (description, input schema, mutating)``
ToolTable = Mapping[str, tuple[str, dict[str, Any], bool]]
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_MAX_REASON = 300


class TableTools:
    """Subclasses set ``table`` and ``expected`` and fill ``handlers``."""

    table: ClassVar[ToolTable]
    expected: ClassVar[tuple[type[Exception], ...]] = ()
    handlers: dict[str, Handler]

    _validators: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "table" in cls.__dict__:
            cls._validators = {
                name: jsonschema.Draft202012Validator(schema)
                for name, (_, schema, _) in cls.table.items()
            }

    def infos(self) -> builtins.list[ToolInfo]:
        return [
            ToolInfo(name, description, copy.deepcopy(schema), mutating)
            for name, (description, schema, mutating) in self.table.items()
        ]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        if name not in self.table:
            raise ToolError(f"unknown tool {name[:64]!r}")
        document = self.arguments(name, arguments)
        try:
            return await self.handlers[name](document)
        except ToolError:
            raise
        except self.expected as exc:
            raise self.failure(name, exc) from exc

    def failure(self, name: str, exc: Exception) -> ToolError:
        """The `ToolError` of an expected failure of tool ``name``."""
        code = getattr(exc, "code", None)
        prefix = f"[{code}] " if isinstance(code, str) else ""
        return ToolError(f"{name}: {prefix}{exc}", cause=exc)

    def arguments(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        """The arguments as a JSON object valid against the tool's schema (`ToolError`
        naming the first wrong field otherwise)."""
        if arguments is None:
            document: Any = {}
        elif isinstance(arguments, str | bytes):
            try:
                document = json.loads(arguments)
            except ValueError as exc:
                raise ToolError(f"{name}: the arguments are not JSON ({exc})") from None
        else:
            document = dict(arguments)
        errors = sorted(
            self._validators[name].iter_errors(document), key=lambda e: list(e.absolute_path)
        )
        if errors:
            first = errors[0]
            raise ToolError(
                f"{name}: invalid arguments at {first.json_path}: {first.message[:_MAX_REASON]}"
            )
        result: dict[str, Any] = document
        return result
