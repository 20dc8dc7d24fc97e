"""A sources file reconciled into the registry: what ``flowledger mcp|web|worker --sources
FILE`` do before they serve anything (docs/sources.md, "The sources file").

A sources file is YAML or JSON holding a list of ``flowledger.source/v1`` documents (one
document alone is a list of one; an empty file is an empty list). A directory is read as
the concatenation of its ``*.yaml``, ``*.yml`` and ``*.json`` files, in name order; other
files and hidden ones (``.name``) are ignored.

`load_sources` reads and validates everything before anything is written: an unreadable
file, a document that is not valid or a name given twice is one `SourcesFileError`, whose
one-line message names the place (``sources.yaml[2] (source 'weather'): stdio.command:
...``, ``sources.d/clock.yaml: ...``).

`reconcile` then `SourceRegistry.put`s each document in file order: a new name is
registered (a removed name comes back at its next revision), a changed document becomes
the source's next revision (its enabled state kept), an unchanged one writes nothing.
Registered sources the file does not name are left alone and listed (`Reconciled.absent`):
a file never removes or disables a source (``flowledger source remove|disable`` do). Two
processes reconciling the same file at once both succeed: the one that loses a
compare-and-swap reads again and finds the document in place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ... import storage
from ..artifacts.document import read_document
from ..artifacts.errors import ArtifactValidationError
from .document import ValidatedSource, validate_source
from .errors import RegistryConflictError, SourceNotRegisteredError
from .store import SourceRegistry

__all__ = [
    "SOURCE_FILE_SUFFIXES",
    "Reconciled",
    "Reconciliation",
    "SourceEntry",
    "SourcesFileError",
    "load_sources",
    "reconcile",
    "reconcile_file",
]

#: The files of a sources directory that are read.
SOURCE_FILE_SUFFIXES: Final = (".json", ".yaml", ".yml")
_RETRIES: Final = 8

Action = Literal["added", "changed", "unchanged"]


class SourcesFileError(ValueError):
    """A sources file (or directory) cannot be used; the message is one line naming the
    place. Nothing was written."""


@dataclass(frozen=True)
class SourceEntry:
    """One document of a sources file, validated, with where it was read."""

    place: str
    source: ValidatedSource


@dataclass(frozen=True)
class Reconciliation:
    """What reconciling did to one source."""

    name: str
    action: Action
    revision: int
    place: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "revision": self.revision,
            "place": self.place,
        }


@dataclass(frozen=True)
class Reconciled:
    """The result of `reconcile`: one entry per document, and the registered sources
    the file does not name (left alone)."""

    path: str
    sources: tuple[Reconciliation, ...]
    absent: tuple[str, ...]

    def lines(self) -> list[str]:
        """What a server says on stderr at start, one line per source and one for the
        sources left alone."""
        lines = [
            f"sources {self.path}: {item.name} {item.action} (revision {item.revision})"
            for item in self.sources
        ]
        if not self.sources:
            lines.append(f"sources {self.path}: the file names no source")
        if self.absent:
            lines.append(
                f"sources {self.path}: left alone (registered, not in the file): "
                + ", ".join(self.absent)
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sources": [item.to_json() for item in self.sources],
            "absent": list(self.absent),
        }


# -- reading ----------------------------------------------------------------------------


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        try:
            found = sorted(path.iterdir(), key=lambda item: item.name)
        except OSError as exc:
            raise SourcesFileError(f"{path}: cannot list: {exc.strerror or exc}") from None
        return [
            item
            for item in found
            if item.suffix in SOURCE_FILE_SUFFIXES
            and not item.name.startswith(".")
            and item.is_file()
        ]
    if not path.exists():
        raise SourcesFileError(f"{path}: no such file or directory")
    return [path]


def _first_issue(exc: ArtifactValidationError) -> str:
    more = len(exc.issues) - 1
    return str(exc.issues[0]) + (f" (and {more} more issue{'s' * (more != 1)})" if more else "")


def _documents(file: Path) -> list[tuple[str, Any]]:
    """The documents of one file, each with its place."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise SourcesFileError(f"{file}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        return []
    try:
        parsed = read_document(data)
    except ArtifactValidationError as exc:
        raise SourcesFileError(f"{file}: {_first_issue(exc)}") from None
    if parsed is None:
        return []
    if isinstance(parsed, dict):
        return [(str(file), parsed)]
    if isinstance(parsed, list):
        return [(f"{file}[{index}]", item) for index, item in enumerate(parsed)]
    raise SourcesFileError(
        f"{file}: a sources file holds a list of flowledger.source/v1 documents (or one document)"
    )


def load_sources(path: str | os.PathLike[str]) -> list[SourceEntry]:
    """Every document of the sources file or directory ``path``, validated, in order
    (`SourcesFileError` for the first problem; see the module)."""
    root = Path(path)
    entries: list[SourceEntry] = []
    seen: dict[str, str] = {}
    for file in _files(root):
        for place, document in _documents(file):
            name = document.get("name") if isinstance(document, dict) else None
            where = f"{place} (source {name!r})" if isinstance(name, str) else place
            try:
                validated = validate_source(document)
            except ArtifactValidationError as exc:
                raise SourcesFileError(f"{where}: {_first_issue(exc)}") from None
            if validated.name in seen:
                raise SourcesFileError(
                    f"{where}: source {validated.name!r} is also defined at "
                    f"{seen[validated.name]}; a name is registered once"
                )
            seen[validated.name] = place
            entries.append(SourceEntry(place, validated))
    return entries


# -- writing ----------------------------------------------------------------------------


async def _put(registry: SourceRegistry, entry: SourceEntry) -> Reconciliation:
    validated = entry.source
    for _ in range(_RETRIES):
        try:
            before = await registry.get(validated.name)
        except SourceNotRegisteredError:
            before = None
        try:
            after = await registry.put(validated)
        except RegistryConflictError:
            continue  # another process changed it meanwhile: read it again
        action: Action = "added"
        if before is not None:
            action = "unchanged" if before.source.digest == validated.digest else "changed"
        return Reconciliation(validated.name, action, after.revision, entry.place)
    raise RegistryConflictError(validated.name, "it kept changing while the file was applied")


async def reconcile(
    registry: SourceRegistry, entries: Sequence[SourceEntry], path: str = ""
) -> Reconciled:
    """Put every entry into ``registry`` (see the module); ``path`` names the file in
    the result's lines."""
    done = [await _put(registry, entry) for entry in entries]
    named = {entry.source.name for entry in entries}
    absent = tuple(item.name for item in await registry.list() if item.name not in named)
    return Reconciled(path, tuple(done), absent)


async def reconcile_file(url: str, path: str | os.PathLike[str]) -> Reconciled:
    """Read ``path`` (nothing is opened if it is invalid), then reconcile it into the
    registry of the database at ``url``. A ``memory://`` store is private to each
    opening, so reconciling into one would be lost: `SourcesFileError`."""
    if url.startswith("memory:"):
        raise SourcesFileError(
            f"{path}: a memory:// database is private to each opening, so sources "
            "reconciled into it would be lost; use a sqlite or postgresql database"
        )
    entries = load_sources(path)
    async with storage.open_store(url) as store:
        return await reconcile(SourceRegistry.over(store), entries, str(path))
