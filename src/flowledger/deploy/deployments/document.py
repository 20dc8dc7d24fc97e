"""The deployment format ``flowledger.deployment/v1``: which artifact version runs, and
how each of its dependencies reaches a concrete MCP source.

A deployment names one exact artifact version (never "latest") and binds every
dependency the artifact declares to a stdio command or an HTTP URL, with the tools
allowed from it. Credentials are *references*: an environment or header value may be
``{secret: ENV_VAR}``, resolved from the executing process's environment when a source
is connected (`SourceBinding.source`). A secret's value is never part of a deployment's
bytes, its identity, a pin, a trace or a diagnostic.

``drift`` says what a changed tool contract means for a paused run (see
`flowledger.deploy.deployments.validation`): ``block`` (the default) refuses the resume,
``compatible`` allows it when every call site's arguments still validate against the
new input schema, ``warn`` allows it with a warning.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import rfc8785
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
)

from flowledger.flow.ids import VERTEX_ID
from flowledger.workflows.authoring.metadata import NAME_PATTERN, VERSION_PATTERN

from ..artifacts.document import check_json_data, read_document
from ..artifacts.errors import ROOT_PLACE, ArtifactIssue, ArtifactValidationError
from ..artifacts.model import TOOL_NAME_PATTERN
from ..artifacts.structure import structure_issues
from ..sources.errors import SourceSpecError
from ..sources.spec import HttpSource, Source, StdioSource

__all__ = [
    "DEPLOYMENT_FORMAT",
    "DRIFT_POLICIES",
    "CredentialMissingError",
    "Deployment",
    "DeploymentValidationError",
    "Secret",
    "SourceBinding",
    "ValidatedDeployment",
    "load_deployment",
    "validate_deployment",
]

DEPLOYMENT_FORMAT: Final = "flowledger.deployment/v1"
DRIFT_POLICIES: Final = ("block", "compatible", "warn")
_ENV_NAME: Final = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

EnvName = Annotated[str, StringConstraints(pattern=_ENV_NAME)]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")]
Text = Annotated[str, StringConstraints(max_length=8192)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Secret(_Strict):
    """A credential by reference: the value of environment variable ``secret`` of the
    process that connects the source."""

    secret: EnvName


def _value_kind(value: Any) -> str:
    return "secret" if isinstance(value, dict | Secret) else "text"


# A literal string or a secret reference; the discriminator keeps errors to one member.
Value = Annotated[
    Annotated[Text, Tag("text")] | Annotated[Secret, Tag("secret")],
    Discriminator(_value_kind),
]


class Stdio(_Strict):
    command: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    args: Annotated[list[Text], Field(max_length=256)] = Field(default_factory=list)
    env: Annotated[dict[EnvName, Value], Field(max_length=128)] = Field(default_factory=dict)
    cwd: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None


class Http(_Strict):
    url: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    headers: Annotated[dict[HeaderName, Value], Field(max_length=128)] = Field(default_factory=dict)


class SourceSpec(_Strict):
    """A source as a deployment binds it: exactly one of ``stdio`` and ``http``
    (what the ``source_probe`` tool takes)."""

    stdio: Stdio | None = None
    http: Http | None = None


class Binding(SourceSpec):
    """How one dependency reaches its source, and the tools allowed from it."""

    allow_tools: Annotated[
        list[Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]],
        Field(min_length=1, max_length=128),
    ]


class ArtifactRef(_Strict):
    name: Annotated[str, StringConstraints(pattern=f"^{NAME_PATTERN.pattern}$")]
    version: Annotated[str, StringConstraints(pattern=f"^{VERSION_PATTERN.pattern}$")]


class Deployment(_Strict):
    """The document (docs/deploy.md, "Deployments")."""

    format: Literal["flowledger.deployment/v1"]
    name: Annotated[str, StringConstraints(pattern=f"^{NAME_PATTERN.pattern}$")]
    description: Annotated[str, StringConstraints(max_length=1024)] = ""
    artifact: ArtifactRef
    sources: Annotated[
        dict[Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")], Binding],
        Field(max_length=32),
    ] = Field(default_factory=dict)
    drift: Literal["block", "compatible", "warn"] = "block"


class DeploymentValidationError(ArtifactValidationError):
    """A deployment document was refused; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ArtifactIssue]) -> None:
        super().__init__(issues)
        Exception.__init__(self, str(self).replace("invalid artifact", "invalid deployment", 1))


class CredentialMissingError(LookupError):
    """A secret a source needs is not set in this process's environment."""

    def __init__(self, dependency: str, variable: str) -> None:
        self.dependency = dependency
        self.variable = variable
        super().__init__(
            f"dependency {dependency!r} needs environment variable {variable}, which is not set"
        )


def _resolve(dependency: str, value: str | Secret, environ: Mapping[str, str]) -> str:
    if isinstance(value, str):
        return value
    found = environ.get(value.secret)
    if found is None:
        raise CredentialMissingError(dependency, value.secret)
    return found


@dataclass(frozen=True)
class SourceBinding:
    """One dependency's binding as a deployment states it (secrets unresolved)."""

    dependency: str
    binding: Binding

    @property
    def allow_tools(self) -> tuple[str, ...]:
        return tuple(self.binding.allow_tools)

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables this binding reads, sorted."""
        return secret_names(self.binding)

    def missing_secrets(self, environ: Mapping[str, str]) -> tuple[str, ...]:
        return tuple(name for name in self.secret_names() if name not in environ)

    def source(self, environ: Mapping[str, str]) -> Source:
        """The concrete source, secrets read from ``environ`` now
        (`CredentialMissingError` for an unset one, `SourceSpecError` for a bad spec)."""
        return source_of(self.dependency, self.binding, environ)

    def identity(self) -> dict[str, Any]:
        """What a pin records: the source's transport fields with variable and header
        *names*, and which of them are secrets (by variable name), never a value."""
        placeholder = {name: "" for name in self.secret_names()}
        identity = self.source(placeholder).identity()
        identity["secrets"] = list(self.secret_names())
        return identity


def source_of(dependency: str, spec: SourceSpec, environ: Mapping[str, str]) -> Source:
    """The concrete source of ``spec`` (`SourceBinding.source`; ``dependency`` names it
    in a `CredentialMissingError`)."""
    if spec.stdio is not None:
        stdio = spec.stdio
        env = {k: _resolve(dependency, v, environ) for k, v in stdio.env.items()}
        return StdioSource(stdio.command, list(stdio.args), env=env, cwd=stdio.cwd)
    assert spec.http is not None
    http = spec.http
    headers = {k: _resolve(dependency, v, environ) for k, v in http.headers.items()}
    return HttpSource(http.url, headers)


def secret_names(spec: SourceSpec) -> tuple[str, ...]:
    """The environment variables ``spec`` reads, sorted."""
    values: list[str | Secret] = []
    if spec.stdio is not None:
        values += spec.stdio.env.values()
    if spec.http is not None:
        values += spec.http.headers.values()
    return tuple(sorted({v.secret for v in values if isinstance(v, Secret)}))


def load_source_spec(document: Mapping[str, Any] | Any) -> SourceSpec:
    """Validate a source spec (JSON data); `DeploymentValidationError` lists every
    problem with its place."""
    issues = check_json_data(document)
    if not issues and not isinstance(document, dict):
        issues = [ArtifactIssue(ROOT_PLACE, "not_object", "a source is a JSON object")]
    if issues:
        raise DeploymentValidationError(issues)
    try:
        spec = SourceSpec.model_validate(document)
    except ValidationError as exc:
        raise DeploymentValidationError(structure_issues(exc, document)) from None
    if (spec.stdio is None) == (spec.http is None):
        raise DeploymentValidationError(
            [
                ArtifactIssue(
                    ROOT_PLACE,
                    "bad_binding",
                    "a source has exactly one of stdio and http",
                    "give either `stdio: {command, ...}` or `http: {url, ...}`",
                )
            ]
        )
    return spec


@dataclass(frozen=True)
class ValidatedDeployment:
    """A deployment that passed validation, with its canonical bytes and SHA-256."""

    deployment: Deployment
    canonical: bytes
    digest: str

    @property
    def name(self) -> str:
        return self.deployment.name

    def bindings(self) -> dict[str, SourceBinding]:
        return {dep: SourceBinding(dep, b) for dep, b in self.deployment.sources.items()}


def load_deployment(source: str | bytes) -> ValidatedDeployment:
    """Read a deployment from YAML or JSON text and validate it."""
    return validate_deployment(read_document(source))


def validate_deployment(document: Mapping[str, Any] | Any) -> ValidatedDeployment:
    """Validate JSON data; `DeploymentValidationError` lists every problem with its place.
    Checks the structure and each binding (one transport, a valid command or URL);
    whether the bindings fit the artifact is checked when a run starts."""
    issues = check_json_data(document)
    if not issues and not isinstance(document, dict):
        issues = [ArtifactIssue(ROOT_PLACE, "not_object", "a deployment is a JSON object")]
    if issues:
        raise DeploymentValidationError(issues)
    try:
        deployment = Deployment.model_validate(document)
    except ValidationError as exc:
        raise DeploymentValidationError(structure_issues(exc, document)) from None
    for dependency, binding in deployment.sources.items():
        place = f"sources.{dependency}"
        if (binding.stdio is None) == (binding.http is None):
            issues.append(
                ArtifactIssue(
                    place,
                    "bad_binding",
                    "a binding has exactly one of stdio and http",
                    "give either `stdio: {command, ...}` or `http: {url, ...}`",
                )
            )
            continue
        try:
            SourceBinding(dependency, binding).identity()
        except SourceSpecError as exc:
            issues.append(ArtifactIssue(place, "bad_source", str(exc)))
        if len(set(binding.allow_tools)) != len(binding.allow_tools):
            issues.append(
                ArtifactIssue(f"{place}.allow_tools", "duplicate_tool", "a tool is listed twice")
            )
    if issues:
        raise DeploymentValidationError(issues)
    data = deployment.model_dump(mode="json", exclude_defaults=True)
    data["format"] = DEPLOYMENT_FORMAT
    canonical = rfc8785.dumps(data)
    return ValidatedDeployment(deployment, canonical, hashlib.sha256(canonical).hexdigest())
