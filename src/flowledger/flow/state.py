"""Folding vertex updates into the accumulated state of a super-step.

Every vertex of a step computes its update from the same frozen step base, so its
update is *blind* to what its siblings wrote. `StepMerge` folds those updates into
the accumulated state one vertex at a time (the engine calls it in vertex-id order):

* a field with a field reducer gets ``reducer(current, update)``, always - also when
  only one vertex writes it;
* any other field takes the update's value, unless another vertex of the step has
  already written it: then the update would silently overwrite a sibling's write, and
  `ConflictingUpdateError` is raised instead.

A custom ``reduce=`` callable is not blind: it receives the accumulated state, so its
result is taken as it is (no field reducers, no conflict with earlier writers). The
fields it changes still count as written, so a later blind write of them conflicts.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any

import pydantic
from typing_extensions import is_typeddict

from .codec import JsonObject
from .errors import ConflictingUpdateError, FieldUpdateError
from .reducers import FieldReducer, state_field_names

__all__ = ["StepMerge", "apply_update", "changed_fields", "is_whole_state"]


# A class's fields are fixed once it is defined, so they are worked out once per class,
# not on every update (states are merged on every step). Weak keys: state classes made
# at run time (from workflow specs) may come and go.
_FIELD_NAMES: weakref.WeakKeyDictionary[type, frozenset[str] | None] = weakref.WeakKeyDictionary()


def _field_names(state: Any) -> frozenset[str] | None:
    """The field names of a pydantic model or dataclass instance (else None)."""
    if isinstance(state, type):
        return None
    cls = type(state)
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        pass
    names: frozenset[str] | None = None
    if issubclass(cls, pydantic.BaseModel):
        names = frozenset(cls.model_fields)
    elif is_dataclass(cls):
        names = frozenset(f.name for f in fields(cls))
    _FIELD_NAMES[cls] = names
    return names


def is_whole_state(update: Any, state_type: Any) -> bool:
    """Whether ``update`` is an instance of the state type (rather than field updates)."""
    if state_type is dict or not isinstance(state_type, type) or is_typeddict(state_type):
        return False  # a dict or TypedDict state takes mappings; TypedDicts refuse isinstance
    return isinstance(update, state_type)


def apply_update(state: Any, update: Any, state_type: Any) -> Any:
    """Fold ``update`` into ``state`` (a private copy) and return the new state.

    ``None`` keeps the state; an instance of the state type replaces it; a mapping
    sets the named fields (an unknown field is an error). Anything else is an error.
    """
    if update is None:
        return state
    if is_whole_state(update, state_type):
        return update
    if isinstance(update, Mapping):
        _set_fields(state, update, state_type)
        return state
    raise _not_an_update(update)


def changed_fields(before: JsonObject, after: JsonObject) -> list[str]:
    """The top-level fields whose encoded value differs (present in one only included)."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


class StepMerge:
    """The writes of one super-step, and the rules that fold a blind update into the
    accumulated state. Not thread-safe: the coordinator uses it one vertex at a time."""

    def __init__(self, reducers: Mapping[str, FieldReducer], state_type: Any) -> None:
        self._reducers = reducers
        self._state_type = state_type
        self._writers: dict[Any, tuple[str, ...]] = {}

    def assume_written(self, names: Iterable[str], vertices: tuple[str, ...]) -> None:
        """Fields written earlier in the step by one of ``vertices`` (a resumed step knows
        its carried vertices' changes only as a whole)."""
        if vertices:
            for name in names:
                self._writers.setdefault(name, vertices)

    def record(self, vertex: str, names: Iterable[Any]) -> None:
        """``vertex``'s update of ``names`` is now part of the accumulated state."""
        for name in names:
            if name not in self._reducers:
                self._writers[name] = (*self._writers.get(name, ()), vertex)

    def merge(
        self,
        vertex: str,
        state: Any,
        update: Any,
        step_base: JsonObject,
        dump: Callable[[Any], JsonObject],
    ) -> tuple[Any, list[Any]]:
        """Fold a vertex's blind ``update`` into ``state`` (a private copy of the accumulated
        state); return the new state and the fields it writes. ``dump`` encodes a state
        (to compare a whole state's fields with the step base).

        Raises `ConflictingUpdateError` before touching ``state`` when a field without a
        reducer was already written in this step, and `FieldUpdateError` when a field
        reducer fails or a whole state replaces a reduced field."""
        if update is None:
            return state, []
        if is_whole_state(update, self._state_type):
            # A whole state was made from the step base: its writes are what it changed.
            written = [k for k in changed_fields(step_base, dump(update)) if k in step_base]
            for name in written:
                if name in self._reducers:
                    raise FieldUpdateError(
                        name,
                        vertex,
                        "the field has a reducer, so it takes an update, not a new value "
                        "inside a whole state; return a mapping such as "
                        f"{{{name!r}: <update>}} instead",
                    )
            items = {name: getattr(update, name) for name in written}
        elif isinstance(update, Mapping):
            items = dict(update)
        else:
            raise _not_an_update(update)
        _check_names(state, items, self._state_type)
        for name in items:
            if name not in self._reducers and name in self._writers:
                raise ConflictingUpdateError(name, vertex, self._writers[name])
        for name in items:
            reducer = self._reducers.get(name)
            if reducer is not None:
                items[name] = self._reduce(vertex, state, name, reducer, items[name])
        _set_fields(state, items, self._state_type)
        return state, list(items)

    def _reduce(
        self, vertex: str, state: Any, name: str, reducer: FieldReducer, update: Any
    ) -> Any:
        if isinstance(state, dict):
            if name not in state:
                raise FieldUpdateError(
                    name,
                    vertex,
                    "the field has a reducer but the state holds no value for it to reduce "
                    "into; give it an initial value",
                )
            current = state[name]
        else:
            current = getattr(state, name)
        try:
            return reducer(current, update)
        except Exception as exc:
            raise FieldUpdateError(name, vertex, "its reducer failed", exc) from exc


def _check_names(state: Any, update: Mapping[Any, Any], state_type: Any) -> None:
    """Refuse a partial update of a field the state does not have."""
    if isinstance(state, dict):
        names = state_field_names(state_type)  # None: a plain dict takes any key
    else:
        names = _field_names(state)
        if names is None:
            raise TypeError(f"cannot apply a partial update to a {type(state).__name__}")
    if names is not None:
        for key in update:
            if key not in names:
                raise KeyError(f"the state has no field {key!r}")


def _set_fields(state: Any, update: Mapping[Any, Any], state_type: Any) -> None:
    _check_names(state, update, state_type)
    if isinstance(state, dict):
        state.update(update)
        return
    for key, value in update.items():
        setattr(state, key, value)


def _not_an_update(update: Any) -> TypeError:
    return TypeError(
        f"a vertex returned {type(update).__name__}; expected a mapping of field updates, "
        "a whole state, or None"
    )
