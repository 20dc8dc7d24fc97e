"""How ``--help`` shows parameters: flags without a type, values with a word for them.

typer's rich help writes a type in front of every parameter's help, also for flags, which
take no value (``--read-only <bool>``, even ``--help <bool>``), and next to arguments
that already show a metavar (``NAME <str>``). Such a type says nothing a person needs,
so `hide_redundant_types` drops it; options that take a value give themselves a metavar
(``S``, ``N``, ``HOST``) instead of typer's ``<int range>``.
"""

from __future__ import annotations

from typing import Any

import typer.core

__all__ = ["hide_redundant_types"]


def hide_redundant_types() -> None:
    """Show no type for flags, nor for arguments with a metavar (idempotent)."""
    _patch(typer.core.TyperOption, lambda param: bool(getattr(param, "is_flag", False)))
    _patch(typer.core.TyperArgument, lambda param: param.metavar is not None)


def _patch(kind: type, redundant: Any) -> None:
    original = getattr(kind, "display_type_rich", None)
    if original is None or getattr(original, "_flowledger_patched", False):
        return  # another typer, or done already

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if redundant(self) and (isinstance(self, typer.core.TyperArgument) or self.metavar is None):
            return None
        result: str | None = original(self, ctx)
        return result

    display_type_rich._flowledger_patched = True  # type: ignore[attr-defined]
    kind.display_type_rich = display_type_rich  # type: ignore[attr-defined]
