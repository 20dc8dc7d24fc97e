"""Field reducers: how parallel updates of one state field combine.

A field reducer is any ``(current, update) -> new`` callable. It is declared on the
state type with ``Annotated`` (dataclasses, TypedDicts, pydantic models alike)::

    @dataclass
    class Review:
        notes: Annotated[list[str], flow.append] = field(default_factory=list)
        score: Annotated[int, operator.add] = 0

or, for a state without annotations (``state=dict``), with ``Graph(reducers={...})``.
The engine applies it to every update of the field, one vertex at a time in vertex-id
order, so a field with a reducer never loses a sibling's write.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Annotated, Any, get_args, get_origin

import pydantic
from typing_extensions import is_typeddict

from .errors import BuildError

__all__ = ["FieldReducer", "append", "declared_reducers", "state_field_names"]

FieldReducer = Callable[[Any, Any], Any]


def append(current: Any, update: Any) -> list[Any]:
    """The list ``current`` followed by ``update``: a list or tuple adds its items, any
    other value is added as one item. (For a field whose items are themselves lists, send
    a list of items: ``{"rows": [row]}``.)"""
    start = [] if current is None else list(current)
    if isinstance(update, list | tuple):
        return [*start, *update]
    return [*start, update]


def state_field_names(state_type: Any) -> frozenset[str] | None:
    """The top-level fields of a typed state, or ``None`` for a plain ``dict`` state."""
    if state_type is dict or state_type is None:
        return None
    if isinstance(state_type, type) and issubclass(state_type, pydantic.BaseModel):
        return frozenset(state_type.model_fields)
    if is_dataclass(state_type):
        return frozenset(f.name for f in fields(state_type))
    if is_typeddict(state_type):
        return frozenset(state_type.__annotations__)
    return None


def declared_reducers(
    state_type: Any, explicit: Mapping[str, FieldReducer] | None
) -> dict[str, FieldReducer]:
    """Every field reducer of a graph: ``Annotated`` metadata of the state type's fields,
    plus ``explicit`` ones (``Graph(reducers=...)``). A field may have one reducer."""
    names = state_field_names(state_type)
    found = _annotated(state_type, names) if names is not None else {}
    for name, reducer in (explicit or {}).items():
        if not isinstance(name, str):
            raise BuildError("Graph", f"reducers: field name {name!r} is not a string")
        if not callable(reducer):
            raise BuildError("Graph", f"reducers: the reducer of field {name!r} is not callable")
        if names is not None and name not in names:
            raise BuildError("Graph", f"reducers: the state has no field {name!r}")
        if name in found:
            raise BuildError(
                "Graph", f"reducers: field {name!r} already declares a reducer in its annotation"
            )
        found[name] = reducer
    return found


def _annotated(state_type: Any, names: frozenset[str]) -> dict[str, FieldReducer]:
    metadata = _metadata(state_type)
    found: dict[str, FieldReducer] = {}
    for name in sorted(names):
        # Classes are callable too, but as metadata they are markers, not reducers.
        candidates = [m for m in metadata.get(name, ()) if callable(m) and not isinstance(m, type)]
        if len(candidates) > 1:
            raise BuildError("Graph", f"field {name!r} of the state declares two reducers")
        if candidates:
            found[name] = candidates[0]
    return found


def _metadata(state_type: Any) -> dict[str, tuple[Any, ...]]:
    """The ``Annotated`` metadata of each top-level field of a state type."""
    if isinstance(state_type, type) and issubclass(state_type, pydantic.BaseModel):
        # pydantic has resolved the annotations already and keeps Annotated's metadata.
        return {name: tuple(f.metadata) for name, f in state_type.model_fields.items()}
    try:
        hints = typing.get_type_hints(state_type, include_extras=True)
    except Exception as exc:  # an unresolvable forward reference, e.g. to a local type
        raw = getattr(state_type, "__annotations__", {})
        for name, annotation in raw.items():
            if isinstance(annotation, str) and "Annotated" in annotation:
                raise BuildError(
                    "Graph",
                    f"cannot resolve the annotation of field {name!r} of "
                    f"{state_type.__qualname__} to find its reducer: {exc}",
                ) from exc
        hints = {n: a for n, a in raw.items() if not isinstance(a, str)}
    return {
        name: tuple(get_args(hint)[1:])
        for name, hint in hints.items()
        if get_origin(hint) is Annotated
    }
