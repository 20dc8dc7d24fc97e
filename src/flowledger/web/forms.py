"""HTML forms generated from JSON Schemas (a definition's input schema, a pause's resume
schema), and the submitted fields turned back into the JSON object the tool receives.

An object schema with ``properties`` becomes one field per property, the required ones
first (each group in the schema's order): a single-line text input for a string (a
textarea for one called like a body: its name, or the name's last ``_`` word, in
`BODY_NAMES`), a number input, a yes/no select for booleans, a select for an ``enum``
(its ``default`` pre-selected), and a JSON textarea for anything else (objects, arrays,
unions), with a hint saying what JSON it takes. The HTML constraints (``required``,
lengths, bounds) let the browser check what it can; the page's script checks the JSON
fields; the server parses every field here (`FormError` names every field it cannot
read) and the tool then validates the whole object against the schema, whose error the
page shows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..jsontext import DuplicateKeyError, decode_json

__all__ = ["BODY_NAMES", "FormError", "FormField", "form_fields", "parse_form"]

# a string under one of these names (or ending in ``_<name>``) is a body of text, not a line
BODY_NAMES: Final = frozenset(
    {"body", "content", "description", "document", "message", "note", "notes", "prompt", "text"}
)
WHOLE: Final = "__json__"  # the one field of a schema that is not an object with properties


class FormError(ValueError):
    """Submitted fields that cannot be read as their schema's types: ``problems`` is each
    one's (field, message), ``field`` the first field named."""

    def __init__(self, name: str, message: str) -> None:
        self.problems: tuple[tuple[str, str], ...] = ((name, message),)
        super().__init__(f"{name}: {message}")
        self.field = name

    @classmethod
    def every(cls, errors: list[FormError]) -> FormError:
        """One error naming every problem of ``errors`` (at least one)."""
        out = cls(errors[0].field, "")
        out.problems = tuple(problem for error in errors for problem in error.problems)
        out.args = ("; ".join(f"{name}: {message}" for name, message in out.problems),)
        return out


@dataclass(frozen=True)
class FormField:
    name: str
    kind: str  # text, textarea, integer, number, boolean, enum, json
    required: bool
    description: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    options: tuple[str, ...] = ()  # enum: the JSON texts of the allowed values
    default: str = ""  # an enum's as the JSON text of its option
    hint: str = ""  # a JSON field: what it takes, as an example

    @property
    def choices(self) -> list[tuple[str, str]]:
        """An enum's (value, label) pairs: the value is the JSON text the form sends, the
        label what a person reads (a string without its JSON quotes)."""
        return [(option, _label(option)) for option in self.options]


def _label(option: str) -> str:
    value = json.loads(option)
    return value if isinstance(value, str) else option


def _kind(name: str, schema: Mapping[str, Any]) -> str:
    if "enum" in schema and all(isinstance(v, (str, int, float, bool)) for v in schema["enum"]):
        return "enum"
    kind = schema.get("type")
    if kind == "string":
        # a length bound says how much, not how many lines: a 4096-byte path is one line
        last = name.lower().replace("-", "_").rsplit("_", 1)[-1]
        return "textarea" if last in BODY_NAMES else "text"
    if kind in ("integer", "number", "boolean"):
        return str(kind)
    return "json"


_HINTS: Final = {
    "array": 'JSON: a list, like ["a", "b"]',
    "object": 'JSON: an object, like {"key": "value"}',
}
_ANY: Final = 'JSON: a value, like "text", 3, true or null'


def _hint(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    return _HINTS.get(kind, _ANY) if isinstance(kind, str) else _ANY


def _attributes(kind: str, schema: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    if kind in ("text", "textarea"):
        for key, attr in (("minLength", "minlength"), ("maxLength", "maxlength")):
            if isinstance(schema.get(key), int):
                out[attr] = str(schema[key])
    if kind in ("integer", "number"):
        out["step"] = "1" if kind == "integer" else "any"
        for key, attr in (("minimum", "min"), ("maximum", "max")):
            value = schema.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[attr] = str(value)
    return out


def form_fields(schema: Mapping[str, Any] | None) -> list[FormField]:
    """The fields of a form for ``schema`` (none for a schema that takes no properties)."""
    if not isinstance(schema, Mapping):
        return [FormField(WHOLE, "json", True, "the whole value, as JSON", hint=_ANY)]
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, Mapping):
        return [FormField(WHOLE, "json", True, "the whole value, as JSON", hint=_hint(schema))]
    required = set(schema.get("required") or ())
    fields = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        kind = _kind(str(name), prop)
        default = ""
        if "default" in prop:
            value = prop["default"]
            # an enum's options are JSON texts, so its default is one too
            plain = isinstance(value, str) and kind not in ("json", "enum")
            default = value if plain else json.dumps(value)
        fields.append(
            FormField(
                name=str(name),
                kind=kind,
                required=name in required,
                description=str(prop.get("description", "")),
                attributes=_attributes(kind, prop),
                options=tuple(json.dumps(v) for v in prop.get("enum", ())),
                default=default,
                hint=_hint(prop) if kind == "json" else "",
            )
        )
    return sorted(fields, key=lambda f: not f.required)  # stable: schema order kept


def _value(item: FormField, text: str) -> Any:
    if item.kind in ("text", "textarea"):
        return text
    if item.kind == "boolean":
        if text not in ("true", "false"):
            raise FormError(item.name, "choose yes or no")
        return text == "true"
    if item.kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise FormError(item.name, "must be a whole number") from None
    if item.kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise FormError(item.name, "must be a number") from None
        if not math.isfinite(number):
            raise FormError(item.name, "must be a finite number")
        return int(number) if number.is_integer() and "." not in text else number
    try:  # enum (JSON texts of the allowed values) and json
        return decode_json(text)
    except DuplicateKeyError as exc:  # refused on every path JSON comes in by
        raise FormError(item.name, f"is not valid JSON ({exc})") from None
    except json.JSONDecodeError as exc:
        raise FormError(item.name, f"is not valid JSON ({exc.msg} at {exc.pos})") from None


def parse_form(schema: Mapping[str, Any] | None, form: Mapping[str, str]) -> Any:
    """The JSON value the submitted ``form`` stands for under ``schema``. An empty
    optional field is left out; an empty required field is `FormError` (the schema's
    own check would say the same, less clearly)."""
    fields = form_fields(schema)
    if len(fields) == 1 and fields[0].name == WHOLE:
        text = form.get(WHOLE, "")
        if not text.strip():
            raise FormError("value", "is required")
        return _value(fields[0], text)
    out: dict[str, Any] = {}
    errors: list[FormError] = []
    for item in fields:
        text = form.get(item.name, "")
        if text == "" or (item.kind not in ("text", "textarea") and not text.strip()):
            if item.required:
                errors.append(FormError(item.name, "is required"))
            continue
        try:
            out[item.name] = _value(item, text)
        except FormError as exc:
            errors.append(exc)
    if errors:
        raise FormError.every(errors)
    return out
