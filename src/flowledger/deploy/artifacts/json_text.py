"""The length of a value's compact JSON text, without building the text.

JMESPath's ``to_string`` is ``json.dumps(value, separators=(",", ":"), default=str)``:
ASCII only, so a character may take up to twelve (``"\\ud83d\\ude00"`` for one emoji).
`json_text_length` gives the exact length of that text from counts the C string methods
make, so ``to_string`` can refuse a text over the bound before building it.
"""

from __future__ import annotations

import math
from typing import Any, Final

__all__ = ["json_text_length", "string_json_length"]

_SHORT_ESCAPES: Final = '"\\\b\f\n\r\t'  # written as two characters: \" \\ \b \f \n \r \t
# Written as six (\u00XX): the other C0 controls, and DEL (ensure_ascii escapes it).
_LONG_ESCAPES: Final = "".join(
    chr(code) for code in [*range(0x20), 0x7F] if chr(code) not in _SHORT_ESCAPES
)


def string_json_length(text: str) -> int:
    """``len(json.dumps(text))``: the quotes, one character for each printable ASCII
    one, two for a short escape, six for every other character of the Basic
    Multilingual Plane (a lone surrogate included), twelve (a surrogate pair) above it."""
    length = 2 + len(text)
    length += sum(text.count(char) for char in _SHORT_ESCAPES)
    if not text.isascii():
        ascii_chars = len(text.encode("ascii", "ignore"))
        units = len(text.encode("utf-16-le", "surrogatepass")) // 2  # above the BMP: two
        length += 5 * (units - ascii_chars) + (units - len(text))
    if not text.isprintable():  # one fast pass first: controls (DEL too) are rare
        length += 5 * sum(text.count(char) for char in _LONG_ESCAPES)
    return length


def json_text_length(value: Any, room: int) -> tuple[int, int]:
    """``(values, length)``: the JSON values in ``value`` and the length of
    ``json.dumps(value, separators=(",", ":"), default=str)``, counting stopped as soon
    as the length is over ``room`` (so it is exact when within it, and over it
    otherwise). Exact for JSON data (what an evaluation reads and builds)."""
    values = length = 0
    pending = [value]
    while pending and length <= room:
        item = pending.pop()
        values += 1
        if isinstance(item, str):
            length += string_json_length(item)
        elif item is None or item is True:
            length += 4
        elif item is False:
            length += 5
        elif isinstance(item, int):
            length += len(int.__repr__(item))
        elif isinstance(item, float):
            length += len(float.__repr__(item)) if math.isfinite(item) else _special(item)
        elif isinstance(item, list):
            length += 2 + max(len(item) - 1, 0)  # brackets and commas
            pending.extend(item)
        elif isinstance(item, dict):
            length += 2 + max(len(item) - 1, 0) + len(item)  # braces, commas and colons
            for key in item:  # JSON data has string keys only; str() is close for others
                length += string_json_length(key if isinstance(key, str) else str(key))
            pending.extend(item.values())
        else:  # not JSON: ``default=str`` writes its str() as a string
            length += string_json_length(str(item))
    return values, length


def _special(number: float) -> int:
    return 3 if math.isnan(number) else len("Infinity") + (number < 0)
