"""The deployment format ``flowledger.deployment/v1``: which artifact version runs, and
how each of its dependencies reaches a concrete MCP source.

A deployment names one exact artifact version (never "latest") and binds every
dependency the artifact declares, with the tools allowed from it, to a source:

* a **registered** source by name (``source: NAME``, optionally ``revision: N``): the
  operator's registry says how to reach it and which secrets it may use
  (`flowledger.deploy.registry`). The only kind of binding a tenant of a shared server
  may save;
* an **inline** ``stdio`` command or ``http`` URL (an operator's tool: the CLI, files, a
  stdio MCP server the operator started). Credentials are *references*: an environment
  or header value may be ``{secret: ENV_VAR}``, resolved from the executing process's
  environment when the source is connected (`SourceBinding.source`); ``FLOWLEDGER_*``
  variables never resolve.

A secret's value is never part of a deployment's bytes, its identity, a pin, a trace or
a diagnostic.

``drift`` says what a changed tool contract means for a paused run (see
`flowledger.deploy.deployments.validation`): ``block`` (the default) refuses the resume,
``compatible`` allows it when every call site's arguments still validate against the
new input schema, ``warn`` allows it with a warning.

``idempotent`` on a binding (``true`` for every allowed tool, or a list of tool names)
is the operator's statement that calling those tools twice has the effect of calling
them once, whatever their annotations say: it lets a tool node retry ``timeout``,
``invalid_result`` and ``outcome_unknown`` failures of them (docs/deploy.md, "Failures").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import rfc8785
from pydantic import Field, StringConstraints, ValidationError

from flowledger.flow.ids import VERTEX_ID
from flowledger.workflows.authoring.metadata import NAME_PATTERN, VERSION_PATTERN

from ..artifacts.document import check_json_data, read_document
from ..artifacts.errors import ROOT_PLACE, ArtifactIssue, ArtifactValidationError
from ..artifacts.model import TOOL_NAME_PATTERN
from ..artifacts.structure import structure_issues
from ..registry.spec import (
    CredentialMissingError,
    Secret,
    SourceSpec,
    Strict,
    identity_of,
    reserved_secret_issues,
    secret_names,
    source_of,
)
from ..sources.errors import SourceSpecError
from ..sources.spec import Source

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
_Strict = Strict


class Binding(SourceSpec):
    """How one dependency reaches its source, and the tools allowed from it: a
    registered source by name (``source``, optionally an exact ``revision``), or, for
    the operator only, an inline ``stdio`` or ``http`` spec."""

    source: Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")] | None = None
    revision: Annotated[int, Field(ge=1)] | None = None
    allow_tools: Annotated[
        list[Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]],
        Field(min_length=1, max_length=128),
    ]
    idempotent: (
        bool
        | Annotated[
            list[Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]],
            Field(max_length=128),
        ]
        | None
    ) = None


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


@dataclass(frozen=True)
class SourceBinding:
    """One dependency's binding as a deployment states it (secrets unresolved)."""

    dependency: str
    binding: Binding

    @property
    def allow_tools(self) -> tuple[str, ...]:
        return tuple(self.binding.allow_tools)

    def declared_idempotent(self, tool: str) -> bool:
        """Whether the deployment declares ``tool`` idempotent (``idempotent: true`` or
        a list naming it)."""
        declared = self.binding.idempotent
        if isinstance(declared, list):
            return tool in declared
        return declared is True

    @property
    def registered(self) -> str | None:
        """The registered source's name, or ``None`` for an inline binding."""
        return self.binding.source

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables an inline binding reads, sorted."""
        return secret_names(self.binding)

    def source(self, environ: Mapping[str, str]) -> Source:
        """An inline binding's concrete source, secrets read from ``environ`` now
        (`CredentialMissingError` for an unset one, `SourceSpecError` for a bad spec)."""
        return source_of(self.dependency, self.binding, environ)

    def identity(self) -> dict[str, Any]:
        """What a pin records of an inline binding: the source's transport fields with
        variable and header *names*, and which of them are secrets, never a value."""
        return identity_of(self.binding)


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
        kinds = [binding.stdio, binding.http, binding.source]
        if sum(kind is not None for kind in kinds) != 1:
            issues.append(
                ArtifactIssue(
                    place,
                    "bad_binding",
                    "a binding has exactly one of source, stdio and http",
                    "bind a registered source (`source: NAME`), or, as the operator, give "
                    "`stdio: {command, ...}` or `http: {url, ...}`",
                )
            )
            continue
        if binding.revision is not None and binding.source is None:
            issues.append(
                ArtifactIssue(
                    f"{place}.revision",
                    "bad_binding",
                    "revision pins a registered source: it goes with source",
                    "remove revision, or bind `source: NAME`",
                )
            )
        if binding.source is None:
            issues += reserved_secret_issues(binding, place)
            try:
                SourceBinding(dependency, binding).identity()
            except SourceSpecError as exc:
                issues.append(ArtifactIssue(place, "bad_source", str(exc)))
        if isinstance(binding.idempotent, list):
            for index, tool in enumerate(binding.idempotent):
                if tool not in binding.allow_tools:
                    issues.append(
                        ArtifactIssue(
                            f"{place}.idempotent[{index}]",
                            "idempotent_not_allowed",
                            f"tool {tool!r} is declared idempotent but not allowed",
                            f"add it to sources.{dependency}.allow_tools, or remove it here",
                        )
                    )
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
