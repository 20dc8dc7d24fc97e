"""Does an input schema fit its state type? Checked when a definition is registered.

With the default state decoder, an input document becomes the initial state through the
state type's pydantic adapter. An input-schema property the state type has no field for
would be dropped without a word, and a property whose values the field's type cannot hold
would be refused at run time as if the caller were wrong. Both are the author's mistakes,
so registration refuses them, naming the property.

Types are compared where both sides say plainly what they are (a JSON Schema ``type``, or
a union of them): an input type fits if the field accepts it, an ``integer`` also fits a
``number``. Anything else (references, ``enum`` without ``type``, custom types) is not
compared. A plain ``dict`` state accepts every property.
"""

from __future__ import annotations

from typing import Any

import pydantic

from ..errors import InvalidSchemaError

__all__ = ["check_state_fields"]


def check_state_fields(input_schema: dict[str, Any], state_type: Any) -> None:
    """Raise `InvalidSchemaError` (field ``input``) for the first input-schema property
    (in schema order) that ``state_type`` has no field for, or whose JSON types the field
    cannot hold."""
    if state_type is dict:
        return
    try:
        state_schema = pydantic.TypeAdapter(state_type).json_schema()
    except Exception:  # a type pydantic cannot describe: nothing to compare with
        return
    fields = state_schema.get("properties")
    if not isinstance(fields, dict) or state_schema.get("additionalProperties") is True:
        return
    properties = input_schema.get("properties")
    if not isinstance(properties, dict):
        return
    state_name = getattr(state_type, "__name__", repr(state_type))
    for name, prop in properties.items():
        if name not in fields:
            raise InvalidSchemaError(
                "input",
                f"input schema property {name!r} has no field in the state type "
                f"{state_name} (the state decoder would drop it); add the field, or remove "
                "the property, or pass a state_decoder",
            )
        wanted = _types(prop)
        held = _types(fields[name])
        if wanted is None or held is None:
            continue
        misfits = [kind for kind in wanted if not _fits(kind, held)]
        if misfits:
            raise InvalidSchemaError(
                "input",
                f"input schema property {name!r} allows {_words(wanted)}, but the state "
                f"field {state_name}.{name} holds {_words(held)}",
            )


def _types(schema: Any) -> list[str] | None:
    """The JSON types ``schema`` says plainly it allows, or ``None``."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and all(isinstance(item, str) for item in kind):
        return list(kind)
    for union in ("anyOf", "oneOf"):
        branches = schema.get(union)
        if isinstance(branches, list) and kind is None:
            found: list[str] = []
            for branch in branches:
                inner = _types(branch)
                if inner is None:
                    return None
                found += inner
            return found
    return None


def _fits(kind: str, held: list[str]) -> bool:
    return kind in held or (kind == "integer" and "number" in held)


def _words(kinds: list[str]) -> str:
    return " or ".join(dict.fromkeys(kinds))
