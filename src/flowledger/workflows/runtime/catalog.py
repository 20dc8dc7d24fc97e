"""The catalog: registered workflow definitions by ``(name, version)``.

Registering stores the definition's *registered copy* (schemas compiled at that moment,
a fresh token owner), never the object passed in: later changes to the original cannot
reach the catalog, and the original stays unregistered. The same definition registered
in two catalogs yields two registrations whose tokens are mutually refused.
"""

from __future__ import annotations

import builtins
import threading

from ... import flow
from ...clock import Clock
from ..authoring.definition import Definition, TypedDefinition
from ..authoring.metadata import Metadata
from ..errors import DuplicateDefinitionError, InvalidSchemaError, UnknownDefinitionError
from ..retention.pruning import RetentionPolicy

__all__ = ["Catalog"]


class Catalog:
    """A thread-safe map from ``(name, version)`` to registered definitions.

    ``retention`` is the application's retention policy: workers serving this catalog
    prune old finished runs of the sessions they own by it (unless the worker is given
    its own)."""

    def __init__(self, *, retention: RetentionPolicy | None = None) -> None:
        if retention is not None and not isinstance(retention, RetentionPolicy):
            raise TypeError("catalog retention must be a RetentionPolicy or None")
        self.retention = retention
        self._lock = threading.Lock()
        self._definitions: dict[tuple[str, str], Definition] = {}

    def register(self, definition: Definition) -> Definition:
        """Register ``definition``'s registered copy and return it.

        Raises `InvalidSchemaError` (field ``definition``) for ``None`` or a non-definition,
        whatever `registered_copy` raises (schema compilation: fields ``input`` and
        ``resume``), and `DuplicateDefinitionError` if the name and version are taken
        (another version of the same name is fine)."""
        if definition is None:
            raise InvalidSchemaError("definition", "nil definition")
        if not isinstance(definition, Definition):
            raise InvalidSchemaError(
                "definition", f"{type(definition).__name__} is not a workflow definition"
            )
        # Compiled outside the lock: compilation may be slow and touches nothing shared.
        registered = definition.registered_copy()
        metadata = registered.metadata()
        key = (metadata.name, metadata.version)
        with self._lock:
            if key in self._definitions:
                raise DuplicateDefinitionError(*key)
            self._definitions[key] = registered
        return registered

    def resolve(self, name: str, version: str) -> Definition:
        """The registered copy for ``name@version``, else `UnknownDefinitionError`."""
        with self._lock:
            found = self._definitions.get((name, version))
        if found is None:
            raise UnknownDefinitionError(name, version)
        return found

    def list(self) -> builtins.list[Metadata]:
        """Metadata of every definition, sorted by name, then version (string order).
        The list is new on every call; `Metadata` is immutable."""
        with self._lock:
            items = sorted(self._definitions.items())
        return [definition.metadata() for _, definition in items]

    def bound(self, checkpoints: flow.CheckpointStore, *, clock: Clock | None = None) -> Catalog:
        """A new catalog whose definitions keep their checkpoints in ``checkpoints`` (and,
        with ``clock``, run on it instead of the clock they were compiled with).

        A host (the CLI, the MCP server, a worker) binds an application's catalog to the
        checkpoint store of the database it serves, so applications define workflows
        without choosing storage. Typed definitions are rebound; other definitions are
        registered as they are."""
        with self._lock:
            items = sorted(self._definitions.items())
        bound = Catalog(retention=self.retention)
        for _, definition in items:
            if isinstance(definition, TypedDefinition):
                definition = definition.with_checkpoints(checkpoints, clock=clock)
            bound.register(definition)
        return bound

    def __len__(self) -> int:
        with self._lock:
            return len(self._definitions)

    def __contains__(self, key: object) -> bool:
        """``(name, version) in catalog``; anything else is never contained."""
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        with self._lock:
            return key in self._definitions
