"""Applying a reducer's result to a state copy: the default merge rules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

import pydantic

__all__ = ["apply_update"]


def _field_names(state: Any) -> frozenset[str] | None:
    if isinstance(state, pydantic.BaseModel):
        return frozenset(type(state).model_fields)
    if is_dataclass(state) and not isinstance(state, type):
        return frozenset(f.name for f in fields(state))
    return None


def apply_update(state: Any, update: Any, state_type: Any) -> Any:
    """Fold ``update`` into ``state`` (a private copy) and return the new state.

    ``None`` keeps the state; an instance of the state type replaces it; a mapping
    sets the named fields (an unknown field is an error). Anything else is an error.
    """
    if update is None:
        return state
    if state_type is not dict and isinstance(state_type, type) and isinstance(update, state_type):
        return update
    if isinstance(update, Mapping):
        if isinstance(state, dict):
            state.update(update)
            return state
        names = _field_names(state)
        if names is None:
            raise TypeError(f"cannot apply a partial update to a {type(state).__name__}")
        for key, value in update.items():
            if key not in names:
                raise KeyError(f"the state has no field {key!r}")
            setattr(state, key, value)
        return state
    raise TypeError(
        f"a vertex returned {type(update).__name__}; expected a mapping of field updates, "
        "a whole state, or None"
    )
