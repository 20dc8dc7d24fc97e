"""Typed errors of the source registry: one ``code`` per kind, the words of the deploy
layer's diagnostics (``source_missing``, ``source_disabled``, ...).

The registry's errors are `SourceError` values, so a tool node that cannot reach a
registered source fails its run exactly as it would for an unreachable server, with
nothing sent. Messages name sources, revisions and runs, never a secret or a spec's
values.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sources.errors import SourceError

__all__ = [
    "InlineSourceRefusedError",
    "LaunchRefusedError",
    "RegistryConflictError",
    "RegistryCorruptError",
    "RegistryError",
    "SourceDisabledError",
    "SourceExistsError",
    "SourceInUseError",
    "SourceNotRegisteredError",
]


class RegistryError(SourceError):
    """Something about a registered source was refused or cannot be read."""

    code = "registry_error"


class SourceNotRegisteredError(RegistryError, LookupError):
    """No source of that name (or revision) is registered, or the session asking may not
    see it: a session cannot tell a source it may not see from one that does not exist."""

    code = "source_missing"

    def __init__(self, name: str, revision: int | None = None) -> None:
        what = f"source {name!r}" + ("" if revision is None else f" revision {revision}")
        super().__init__(name, f"{what} is not registered (sources are registered by the operator)")
        self.name = name
        self.revision = revision


class SourceDisabledError(RegistryError):
    code = "source_disabled"

    def __init__(self, name: str) -> None:
        super().__init__(name, f"source {name!r} is disabled by the operator")
        self.name = name


class SourceExistsError(RegistryError):
    code = "source_exists"

    def __init__(self, name: str) -> None:
        super().__init__(
            name, f"source {name!r} is already registered (change it with `source set`)"
        )
        self.name = name


class RegistryConflictError(RegistryError):
    """A compare-and-swap on a source lost: someone else changed it first."""

    code = "revision_conflict"

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(name, f"source {name!r}: {detail}")
        self.name = name


class SourceInUseError(RegistryError):
    """Removal refused: unfinished runs are pinned to the source."""

    code = "source_in_use"

    def __init__(self, name: str, runs: Sequence[str]) -> None:
        shown = ", ".join(runs[:5]) + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")
        super().__init__(
            name,
            f"source {name!r} is used by {len(runs)} unfinished pinned run(s): {shown}; "
            "let them finish or cancel them, or disable the source instead",
        )
        self.name = name
        self.runs = tuple(runs)


class InlineSourceRefusedError(RegistryError):
    """A tenant named a command line or URL instead of a registered source."""

    code = "inline_source_refused"

    def __init__(self, where: str) -> None:
        super().__init__(
            where,
            f"{where}: a source given as a command line or URL is refused here; bind a "
            "source registered by the operator by name ({source: NAME}; see "
            "capability_list and docs/sources.md)",
        )


class RegistryCorruptError(RegistryError):
    code = "registry_corrupt"

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(key, f"source registry record {key} is damaged: {detail}")


class LaunchRefusedError(RegistryError):
    """A read-only server was asked to start or contact a source."""

    code = "launch_refused"

    def __init__(self, name: str) -> None:
        super().__init__(
            name, f"source {name!r}: this read-only server starts and contacts no source"
        )
