"""Token sources of both HTTP servers: file and environment, explicit and derived
sessions, file permissions."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from flowledger import mcp
from flowledger.httpsec import (
    TOKENS_ENV,
    StartupError,
    TokenError,
    load_tokens,
    parse_tokens,
    session_for_token,
)

TOKEN = "abcdefghijklmnop"  # 16 characters
OTHER = "qrstuvwxyz012345-._~+/=="
SESSION = "7C9E6679-7425-40DE-944B-E07FC1F90AE7"


def test_file_with_explicit_and_derived_sessions(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# comment\n\n{TOKEN} {SESSION}\n  {OTHER}  \n")
    path.chmod(0o600)
    tokens = load_tokens(path, environ={})
    assert tokens == {TOKEN: SESSION.lower(), OTHER: session_for_token(OTHER)}


def test_derived_session_is_stable_uuid5() -> None:
    derived = session_for_token(TOKEN)
    assert derived == session_for_token(TOKEN)
    assert uuid.UUID(derived).version == 5
    assert derived != session_for_token(OTHER)
    assert TOKEN not in derived


def test_environment_with_commas_and_newlines() -> None:
    env = {TOKENS_ENV: f" {TOKEN} {SESSION} ,\n{OTHER},, "}
    assert load_tokens(environ=env) == {TOKEN: SESSION.lower(), OTHER: session_for_token(OTHER)}
    assert load_tokens(environ={}) == {}
    assert load_tokens(environ={TOKENS_ENV: "  "}) == {}


def test_file_wins_over_environment(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    assert load_tokens(path, environ={TOKENS_ENV: OTHER}) == {TOKEN: session_for_token(TOKEN)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("short-token", "line 1: a token must be at least 16 characters"),
        (f"{TOKEN} not-a-uuid", "line 1: the session must be a UUID"),
        (f"{TOKEN} 00000000-0000-0000-0000-000000000000", "nonzero"),
        (f"{TOKEN} {SESSION} extra", "line 1: expected"),
        (f"\n{TOKEN}\n{TOKEN} {SESSION}", "line 3: this token is already listed"),
        ('abcdefghijklmnop"quoted', "may only hold"),
    ],
)
def test_malformed_entries_never_echo_the_token(text: str, message: str) -> None:
    with pytest.raises(TokenError) as caught:
        parse_tokens(text, source="tokens file")
    assert message in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert isinstance(caught.value, StartupError)  # what hosts catch: one line, exit 1


def test_same_token_same_session_twice_is_fine() -> None:
    assert parse_tokens(f"{TOKEN} {SESSION}\n{TOKEN} {SESSION.lower()}") == {TOKEN: SESSION.lower()}


def test_unreadable_or_empty_file(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="cannot read the tokens file"):
        load_tokens(tmp_path / "missing", environ={})
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    empty.chmod(0o600)
    with pytest.raises(TokenError, match="lists no token"):
        load_tokens(empty, environ={})


def test_environment_errors_name_the_entry() -> None:
    with pytest.raises(TokenError, match=f"{TOKENS_ENV} entry 2"):
        load_tokens(environ={TOKENS_ENV: f"{TOKEN},short"})


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602, 0o660])
def test_a_file_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    """Reliability II item 8: like ssh, a tokens file writable by group or others is
    refused, with a one-line message that says how to fix it."""
    path = tmp_path / "my tokens"
    path.write_text(f"{TOKEN} {SESSION}\n")
    path.chmod(mode)
    with pytest.raises(TokenError) as caught:
        load_tokens(path, environ={})
    message = str(caught.value)
    assert message == (
        f"the tokens file {str(path)!r} is writable by group or others (mode {mode:04o}); "
        f"fix it with: chmod go-w '{path}'"
    )
    assert TOKEN not in message and "\n" not in message
    path.chmod(0o600)
    assert load_tokens(path, environ={}) == {TOKEN: SESSION.lower()}


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640, 0o644])
def test_a_file_only_its_owner_can_write_is_accepted(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN}\n")
    path.chmod(mode)
    assert load_tokens(path, environ={}) == {TOKEN: session_for_token(TOKEN)}


def test_the_mcp_package_names_the_same_functions() -> None:
    """``flowledger.mcp`` keeps exporting the token API it always did: the shared one."""
    assert mcp.load_tokens is load_tokens
    assert mcp.parse_tokens is parse_tokens
    assert mcp.session_for_token is session_for_token
    assert mcp.TokenError is TokenError
    assert mcp.TOKENS_ENV == TOKENS_ENV
    assert issubclass(mcp.McpStartupError, StartupError)
