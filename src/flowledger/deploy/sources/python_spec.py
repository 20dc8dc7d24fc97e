"""Where a Python capability lives: functions of an importable module, or the built-in
standard library of transforms (`flowledger.deploy.sources.std`).

A `PythonSource` is immutable and hashable like the MCP specs (`SourcePool` keys its
sessions by it). It is constructed only from the operator's source registry (a
``python:`` or ``builtin:`` entry of a ``flowledger.source/v1`` document): a deployment's
inline binding has no such field, so no tenant can make this process import a module.

``functions`` limits which functions are tools (``None``: every public function the
module defines itself, not the names it imports); ``read_only`` and ``idempotent`` are
the annotations the operator sets on registration (a Python function says nothing about
its effects, so absent means neither, as MCP defaults its hints).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .errors import SourceSpecError, clip

__all__ = ["BUILTIN_LIBRARY", "MODULE_PATTERN", "STD_MODULE", "PythonSource"]

#: A dotted module path of Python identifiers (ASCII, as the registry writes them).
MODULE_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]{0,99}(\.[A-Za-z_][A-Za-z0-9_]{0,99}){0,15}$"
_MODULE: Final = re.compile(MODULE_PATTERN)
_FUNCTION: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
#: The module behind ``builtin`` sources, and the library name their identity records.
STD_MODULE: Final = "flowledger.deploy.sources.std"
BUILTIN_LIBRARY: Final = "std"


def _names(label: str, field: str, value: Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise SourceSpecError(label, f"{field} must be a list of function names")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not _FUNCTION.fullmatch(name):
            raise SourceSpecError(label, f"{field}: {clip(repr(name), 60)} is not a function name")
    if len(set(names)) != len(names):
        raise SourceSpecError(label, f"{field} lists a function twice")
    return tuple(sorted(names))


@dataclass(frozen=True)
class PythonSource:
    """Functions of ``module`` called in this process (``builtin``: the standard library
    of transforms, every function read-only and idempotent)."""

    module: str
    functions: tuple[str, ...] | None = None
    read_only: tuple[str, ...] = ()
    idempotent: tuple[str, ...] = ()
    builtin: bool = False

    def __post_init__(self) -> None:
        module = self.module
        if not isinstance(module, str) or not _MODULE.fullmatch(module):
            raise SourceSpecError(
                "python", f"module {clip(repr(module), 60)} is not a dotted module path"
            )
        label = self.label
        if self.builtin and module != STD_MODULE:
            raise SourceSpecError(label, "a builtin source is the standard library only")
        object.__setattr__(self, "functions", _names(label, "functions", self.functions))
        for field in ("read_only", "idempotent"):
            names = _names(label, field, getattr(self, field)) or ()
            if self.functions is not None:
                outside = sorted(set(names) - set(self.functions))
                if outside:
                    raise SourceSpecError(
                        label, f"{field} names {', '.join(outside)}, which functions does not list"
                    )
            object.__setattr__(self, field, names)

    @classmethod
    def std(cls, functions: Sequence[str] | None = None) -> PythonSource:
        """The built-in standard library (all of it, or ``functions``)."""
        return cls(STD_MODULE, None if functions is None else tuple(functions), builtin=True)

    @property
    def label(self) -> str:
        """How messages name this source: ``python:MODULE`` or ``builtin:std``."""
        if self.builtin:
            return f"builtin:{BUILTIN_LIBRARY}"
        return f"python:{self.module}"

    def annotations_of(self, function: str) -> dict[str, Any]:
        """The MCP-style annotations of ``function``: the operator's, or (builtin) all
        read-only and idempotent."""
        if self.builtin:
            return {"readOnlyHint": True, "idempotentHint": True}
        return {
            "readOnlyHint": function in self.read_only,
            "idempotentHint": function in self.idempotent,
        }

    def identity(self) -> dict[str, Any]:
        """JSON for pins and probes."""
        if self.builtin:
            return {
                "transport": "builtin",
                "library": BUILTIN_LIBRARY,
                "functions": None if self.functions is None else list(self.functions),
            }
        return {
            "transport": "python",
            "module": self.module,
            "functions": None if self.functions is None else list(self.functions),
            "read_only": list(self.read_only),
            "idempotent": list(self.idempotent),
        }
