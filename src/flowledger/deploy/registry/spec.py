"""How a source is written down: ``stdio {command, args, env, cwd}`` or ``http {url,
headers}``, with credentials by reference (``{secret: NAME}``).

The same models serve a deployment's inline binding (an operator's tool) and a
registered source (`flowledger.deploy.registry.document`). A secret reference is
resolved only when a source is connected, by the process that connects it, from a
mapping it is given (`source_of`): for an inline binding the operator's environment,
for a registered source the secrets the operator declared for it. A secret's value is
never part of a document's bytes, an identity, a pin, a trace or a diagnostic.

Variables named ``FLOWLEDGER_*`` (the server's own configuration: its tokens, its
database URL) are never resolvable: a reference to one is refused when the document is
read, wherever it comes from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
)

from ..artifacts.document import check_json_data
from ..artifacts.errors import ROOT_PLACE, ArtifactIssue, ArtifactValidationError
from ..artifacts.structure import structure_issues
from ..sources.spec import HttpSource, McpSource, StdioSource

__all__ = [
    "RESERVED_PREFIX",
    "CredentialMissingError",
    "EnvName",
    "Http",
    "Secret",
    "SourceSpec",
    "SourceSpecValidationError",
    "Stdio",
    "load_source_spec",
    "reserved_secret_issues",
    "secret_names",
    "source_of",
]

#: Environment variables that are the server's own configuration: never a secret.
RESERVED_PREFIX: Final = "FLOWLEDGER_"
_ENV_NAME: Final = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

EnvName = Annotated[str, StringConstraints(pattern=_ENV_NAME)]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")]
Text = Annotated[str, StringConstraints(max_length=8192)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Secret(Strict):
    """A credential by reference: the value behind name ``secret``, resolved by the
    process that connects the source."""

    secret: EnvName


def _value_kind(value: Any) -> str:
    return "secret" if isinstance(value, dict | Secret) else "text"


# A literal string or a secret reference; the discriminator keeps errors to one member.
Value = Annotated[
    Annotated[Text, Tag("text")] | Annotated[Secret, Tag("secret")],
    Discriminator(_value_kind),
]


class Stdio(Strict):
    command: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    args: Annotated[list[Text], Field(max_length=256)] = Field(default_factory=list)
    env: Annotated[dict[EnvName, Value], Field(max_length=128)] = Field(default_factory=dict)
    cwd: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None


class Http(Strict):
    url: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    headers: Annotated[dict[HeaderName, Value], Field(max_length=128)] = Field(default_factory=dict)


class SourceSpec(Strict):
    """A source as a document writes it: exactly one of ``stdio`` and ``http``."""

    stdio: Stdio | None = None
    http: Http | None = None


class SourceSpecValidationError(ArtifactValidationError):
    """A source spec was refused; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ArtifactIssue]) -> None:
        super().__init__(issues)
        Exception.__init__(self, str(self).replace("invalid artifact", "invalid source", 1))


class CredentialMissingError(LookupError):
    """A secret a source needs cannot be resolved in this process (not set, or not
    granted to the session that asks)."""

    def __init__(self, dependency: str, variable: str, why: str = "which is not set") -> None:
        self.dependency = dependency
        self.variable = variable
        super().__init__(f"{dependency!r} needs secret {variable}, {why}")


def _secret(dependency: str, name: str, secrets: Mapping[str, str]) -> str:
    if name.startswith(RESERVED_PREFIX):
        raise CredentialMissingError(dependency, name, "which is the server's own configuration")
    found = secrets.get(name)
    if found is None:
        raise CredentialMissingError(dependency, name)
    return found


def _concrete(spec: SourceSpec, secret: Callable[[str], str]) -> McpSource:
    def value(item: str | Secret) -> str:
        return item if isinstance(item, str) else secret(item.secret)

    if spec.stdio is not None:
        stdio = spec.stdio
        env = {k: value(v) for k, v in stdio.env.items()}
        return StdioSource(stdio.command, list(stdio.args), env=env, cwd=stdio.cwd)
    assert spec.http is not None
    return HttpSource(spec.http.url, {k: value(v) for k, v in spec.http.headers.items()})


def source_of(dependency: str, spec: SourceSpec, secrets: Mapping[str, str]) -> McpSource:
    """The concrete source of ``spec``, each ``{secret: NAME}`` read from ``secrets`` now
    (`CredentialMissingError` naming ``dependency`` for one it lacks or a reserved one,
    `SourceSpecError` for a bad spec)."""
    return _concrete(spec, lambda name: _secret(dependency, name, secrets))


def secret_names(spec: SourceSpec) -> tuple[str, ...]:
    """The secret names ``spec`` refers to, sorted."""
    values: list[str | Secret] = []
    if spec.stdio is not None:
        values += spec.stdio.env.values()
    if spec.http is not None:
        values += spec.http.headers.values()
    return tuple(sorted({v.secret for v in values if isinstance(v, Secret)}))


def identity_of(spec: SourceSpec) -> dict[str, Any]:
    """What a pin records of ``spec``: transport fields with variable and header *names*,
    and which secrets it reads (`SourceSpecError` for a bad spec)."""
    identity = _concrete(spec, lambda name: "").identity()
    identity["secrets"] = list(secret_names(spec))
    return identity


def reserved_secret_issues(spec: SourceSpec, place: str) -> list[ArtifactIssue]:
    """A reference to a ``FLOWLEDGER_*`` variable, as an issue at ``place``."""
    return [
        ArtifactIssue(
            place,
            "secret_reserved",
            f"secret {name} is the server's own configuration and is never resolvable",
            "declare the credential under another name",
        )
        for name in secret_names(spec)
        if name.startswith(RESERVED_PREFIX)
    ]


def one_transport_issue(spec: SourceSpec, place: str, what: str) -> ArtifactIssue | None:
    if (spec.stdio is None) == (spec.http is None):
        return ArtifactIssue(
            place,
            "bad_binding",
            f"{what} has exactly one of stdio and http",
            "give either `stdio: {command, ...}` or `http: {url, ...}`",
        )
    return None


def load_source_spec(document: Mapping[str, Any] | Any) -> SourceSpec:
    """Validate a source spec (JSON data); `SourceSpecValidationError` lists every
    problem with its place."""
    issues = check_json_data(document)
    if not issues and not isinstance(document, dict):
        issues = [ArtifactIssue(ROOT_PLACE, "not_object", "a source is a JSON object")]
    if issues:
        raise SourceSpecValidationError(issues)
    try:
        spec = SourceSpec.model_validate(document)
    except ValidationError as exc:
        raise SourceSpecValidationError(structure_issues(exc, document)) from None
    found = one_transport_issue(spec, ROOT_PLACE, "a source")
    issues = [found] if found else reserved_secret_issues(spec, ROOT_PLACE)
    if issues:
        raise SourceSpecValidationError(issues)
    return spec
