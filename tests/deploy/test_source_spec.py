"""Source specs: validation with the field named, equality and hashing by value, and
nothing that prints a spec showing an environment or header value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import HttpSource, SourceSpecError, StdioSource


def test_equal_specs_are_one_source() -> None:
    a = StdioSource("server", ["--flag"], {"B": "2", "A": "1"}, "/tmp")
    b = StdioSource("server", ("--flag",), {"A": "1", "B": "2"}, Path("/tmp"))  # type: ignore[arg-type]
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert a != StdioSource("server", ["--flag"], {"A": "1", "B": "other"}, "/tmp")
    assert a != StdioSource("server", ["--flag"], {"A": "1", "B": "2"})
    h = HttpSource("https://example.test/mcp", {"X-Key": "v"})
    assert h == HttpSource("https://example.test/mcp", {"x-key": "v"})
    assert h != HttpSource("https://example.test/mcp", {"x-key": "w"})
    assert h != a


def test_specs_are_immutable() -> None:
    source = StdioSource("server", ["a"], {"K": "v"})
    with pytest.raises(AttributeError):
        source.command = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        source.env["K"] = "changed"  # type: ignore[index]
    assert source.args == ("a",)


def test_labels_and_identities() -> None:
    stdio = StdioSource("npx", ["-y", "some server"], {"TOKEN": "hidden"}, "/srv")
    assert stdio.label == "\"npx -y 'some server'\""
    assert stdio.identity() == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "some server"],
        "env": ["TOKEN"],
        "cwd": "/srv",
    }
    assert "hidden" not in repr(stdio) and "TOKEN" in repr(stdio)
    http = HttpSource("https://me:pw@example.test:8443/mcp?tenant=a#x", {"Authorization": "pw"})
    assert http.label == "https://example.test:8443/mcp"
    assert http.identity()["url"] == "https://example.test:8443/mcp?tenant=a#x"
    assert "pw" not in repr(http) and "pw" not in http.label


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: StdioSource(""), "command must be a non-empty string"),
        (lambda: StdioSource("a\0b"), "NUL"),
        (lambda: StdioSource("s", "one string"), "args must be a list of strings"),  # type: ignore[arg-type]
        (lambda: StdioSource("s", [1]), "args[0] is not a string"),  # type: ignore[list-item]
        (lambda: StdioSource("s", ["ok", "x\0"]), "args[1] contains a NUL"),
        (lambda: StdioSource("s", env={"1BAD": "v"}), "env name '1BAD' is not a valid name"),
        (lambda: StdioSource("s", env={"K": 3}), "env K must be a string"),  # type: ignore[dict-item]
        (lambda: StdioSource("s", cwd=""), "cwd must be a non-empty path"),
        (lambda: HttpSource(""), "url must be a non-empty string"),
        (lambda: HttpSource("ftp://x/mcp"), "must start with http:// or https://"),
        (lambda: HttpSource("http:///mcp"), "url has no host"),
        (lambda: HttpSource("http://x:99999/mcp"), "url is malformed"),
        (lambda: HttpSource("http://x/ mcp"), "whitespace"),
        (lambda: HttpSource("http://x/mcp", {"Bad Name": "v"}), "is not a valid HTTP header"),
        (lambda: HttpSource("http://x/mcp", {"X": "a\r\nInjected: 1"}), "without CR, LF"),
        (lambda: HttpSource("http://x/mcp", {"X-A": "1", "x-a": "2"}), "given twice"),
    ],
)
def test_invalid_specs_say_what_is_wrong(make: Any, fragment: str) -> None:
    with pytest.raises(SourceSpecError) as caught:
        make()
    assert fragment in str(caught.value)
    assert caught.value.code == "source_invalid"
    assert isinstance(caught.value, ValueError)
