"""The registered source format ``flowledger.source/v1``: a source the operator makes
available, by name, to the sessions it chooses.

```yaml
format: flowledger.source/v1
name: weather
description: Forecasts from the weather service.
stdio:
  command: weather-mcp
  args: [--units, metric]
  env:
    API_KEY: {secret: weather_key}     # a secret declared below
secrets:
  weather_key: {env: WEATHER_API_KEY}  # read from the serving process's environment
sessions: [2f1e0c8a-6a43-4c39-9d55-3a4e2f7b9c10]   # who sees it (default: every session)
allow_tools: [get_forecast]            # what deployments may bind (default: every tool)
call_tools: [get_forecast]             # tried by capability_call beyond read-only tools
```

* Exactly one of ``stdio`` and ``http`` (as a deployment's inline binding writes them),
  ``python: {module, functions?, read_only?, idempotent?}`` (functions of an importable
  module, called in the process that runs the workflow; ``read_only`` and ``idempotent``
  name the functions the operator annotates so) and ``builtin: {functions?}`` (the
  standard library of transforms, `flowledger.deploy.sources.std`), or ``openapi:
  {document, base_url, operations?, auth?}`` (the operations of an OpenAPI 3.0/3.1
  document, an absolute path or a URL, called against ``base_url``; ``auth: {header:
  NAME, secret: SECRET}`` or ``{query: NAME, secret: SECRET}`` sends a declared secret
  with every call). Only a registered source can be ``python``, ``builtin`` or
  ``openapi``: no inline binding names a module, a document or a base URL.
* Every ``{secret: NAME}`` names a secret declared under ``secrets``; a declared secret
  is read from environment variable ``env`` (default: its own name) of the process that
  connects the source, and may be used by the sessions in its ``sessions`` (default:
  every session that sees the source). ``FLOWLEDGER_*`` variables are never secrets.
* ``sessions`` limits who may see, bind, probe and call the source; ``allow_tools``
  limits what deployments may bind; ``call_tools`` lists tools that ``capability_call``
  may try although the server does not annotate them read-only.

The canonical form is RFC 8785 JSON of the document with defaults left out; its
SHA-256 is the revision's digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import rfc8785
from pydantic import Field, StringConstraints, ValidationError

from flowledger.flow.ids import VERTEX_ID

from ..artifacts.document import check_json_data, read_document
from ..artifacts.errors import ROOT_PLACE, ArtifactIssue
from ..artifacts.model import TOOL_NAME_PATTERN
from ..artifacts.structure import structure_issues
from ..sources import std
from ..sources.errors import SourceSpecError
from ..sources.openapi_spec import OPERATION_PATTERN, OpenApiAuth, OpenApiSource
from ..sources.python_spec import MODULE_PATTERN, PythonSource
from ..sources.spec import Source
from .spec import (
    RESERVED_PREFIX,
    EnvName,
    SourceSpec,
    SourceSpecValidationError,
    Strict,
    _secret,
    identity_of,
    reserved_secret_issues,
    secret_names,
    source_of,
)

__all__ = [
    "SOURCE_FORMAT",
    "DeclaredSecret",
    "SourceDocument",
    "ValidatedSource",
    "load_source",
    "validate_source",
]

SOURCE_FORMAT: Final = "flowledger.source/v1"
#: The kinds of registered source, each a field of the document (exactly one is given).
KINDS: Final = ("stdio", "http", "python", "builtin", "openapi")
SESSION_ID: Final = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

SourceName = Annotated[str, StringConstraints(pattern=f"^{VERTEX_ID.pattern}$")]
SessionId = Annotated[str, StringConstraints(pattern=SESSION_ID)]
ToolName = Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]
FunctionName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")]
Functions = Annotated[list[FunctionName], Field(min_length=1, max_length=256)]
#: The functions of the standard library, in name order.
BUILTIN_FUNCTIONS: Final = tuple(std.__all__)


class PythonSpec(Strict):
    """Functions of an importable module (``functions``: these only; default every
    public function the module defines), annotated by the operator."""

    module: Annotated[str, StringConstraints(pattern=MODULE_PATTERN)]
    functions: Functions | None = None
    read_only: Annotated[list[FunctionName], Field(max_length=256)] = Field(default_factory=list)
    idempotent: Annotated[list[FunctionName], Field(max_length=256)] = Field(default_factory=list)


class BuiltinSpec(Strict):
    """The standard library of transforms (``functions``: these only)."""

    functions: Functions | None = None


class OpenApiAuthSpec(Strict):
    """A declared secret sent with every call, as header ``header`` or query parameter
    ``query`` (exactly one)."""

    header: (
        Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")] | None
    ) = None
    query: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.\-\[\]]{1,128}$")] | None = None
    secret: EnvName


class OpenApiSpec(Strict):
    """Operations of an OpenAPI document (``operations``: these only; default every
    operation with an ``operationId``) called against ``base_url``."""

    document: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    base_url: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    operations: (
        Annotated[
            list[Annotated[str, StringConstraints(pattern=OPERATION_PATTERN)]],
            Field(min_length=1, max_length=1024),
        ]
        | None
    ) = None
    auth: OpenApiAuthSpec | None = None


class DeclaredSecret(Strict):
    env: EnvName | None = None
    sessions: Annotated[list[SessionId], Field(max_length=1024)] | None = None


class SourceDocument(SourceSpec):
    format: Literal["flowledger.source/v1"]
    python: PythonSpec | None = None
    builtin: BuiltinSpec | None = None
    openapi: OpenApiSpec | None = None
    name: SourceName
    description: Annotated[str, StringConstraints(max_length=1024)] = ""
    secrets: Annotated[dict[EnvName, DeclaredSecret], Field(max_length=64)] = Field(
        default_factory=dict
    )
    sessions: Annotated[list[SessionId], Field(max_length=1024)] | None = None
    allow_tools: Annotated[list[ToolName], Field(min_length=1, max_length=1024)] | None = None
    call_tools: Annotated[list[ToolName], Field(max_length=1024)] = Field(default_factory=list)


@dataclass(frozen=True)
class ValidatedSource:
    """A registered source document that passed validation, with its canonical bytes."""

    document: SourceDocument
    canonical: bytes
    digest: str

    @property
    def name(self) -> str:
        return self.document.name

    def visible_to(self, session_id: str) -> bool:
        sessions = self.document.sessions
        return sessions is None or session_id in sessions

    def allows(self, tool: str) -> bool:
        """Whether deployments may bind ``tool`` of this source."""
        allowed = self.document.allow_tools
        return allowed is None or tool in allowed

    def granted_secrets(self, session_id: str, environ: Mapping[str, str]) -> dict[str, str]:
        """The declared secrets ``session_id`` may use whose variable is set in
        ``environ``, by secret name."""
        granted = {}
        for name, declared in self.document.secrets.items():
            if declared.sessions is not None and session_id not in declared.sessions:
                continue
            variable = declared.env or name
            if variable in environ and not variable.startswith(RESERVED_PREFIX):
                granted[name] = environ[variable]
        return granted

    def missing_secret(self, session_id: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
        """A secret that cannot be resolved for ``session_id`` and why (the end of a
        sentence), or ``None``."""
        for name in document_secrets(self.document):
            declared = self.document.secrets[name]
            if declared.sessions is not None and session_id not in declared.sessions:
                return name, "which is not granted to this session"
            variable = declared.env or name
            if variable not in environ:
                return name, f"whose variable {variable} is not set in this process"
        return None

    @property
    def kind(self) -> str:
        """``stdio``, ``http``, ``python``, ``builtin`` or ``openapi``."""
        return kind_of(self.document)

    def source(self, session_id: str, environ: Mapping[str, str]) -> Source:
        """The concrete source for ``session_id``, with the secrets it is granted
        (`CredentialMissingError` for one it lacks)."""
        return self.concrete(self.granted_secrets(session_id, environ))

    def concrete(self, secrets: Mapping[str, str]) -> Source:
        """The concrete source with ``secrets`` (secret name -> value) for its
        references (`CredentialMissingError` for one ``secrets`` lacks)."""
        python = python_source(self.document)
        if python is not None:
            return python
        if self.document.openapi is not None:
            return openapi_source(self.name, self.document.openapi, secrets)
        return source_of(self.name, self.document, secrets)

    def identity(self) -> dict[str, Any]:
        """Transport fields, variable and header names and secret names: never a value."""
        python = python_source(self.document)
        if python is not None:
            return {**python.identity(), "secrets": []}
        if self.document.openapi is not None:
            shown = openapi_source(self.name, self.document.openapi, None)
            return {**shown.identity(), "secrets": list(document_secrets(self.document))}
        return identity_of(self.document)


def kind_of(document: SourceDocument) -> str:
    """Which kind of source ``document`` (a valid one) describes."""
    for kind in KINDS:
        if getattr(document, kind) is not None:
            return kind
    raise ValueError("a source document without a kind")


def document_secrets(document: SourceDocument) -> tuple[str, ...]:
    """Every secret name ``document`` refers to (its transport's and its OpenAPI
    ``auth``), sorted."""
    names = set(secret_names(document))
    if document.openapi is not None and document.openapi.auth is not None:
        names.add(document.openapi.auth.secret)
    return tuple(sorted(names))


def openapi_source(
    name: str, spec: OpenApiSpec, secrets: Mapping[str, str] | None
) -> OpenApiSource:
    """The `OpenApiSource` of ``spec`` with its credential read from ``secrets``
    (``None``: a placeholder value, for identities; `CredentialMissingError` for a
    secret ``secrets`` lacks; `SourceSpecError` for a bad spec)."""
    auth = None
    if spec.auth is not None:
        where: Literal["header", "query"] = "header" if spec.auth.header is not None else "query"
        value = "" if secrets is None else _secret(name, spec.auth.secret, secrets)
        auth = OpenApiAuth(
            where, spec.auth.header or spec.auth.query or "", spec.auth.secret, value
        )
    operations = None if spec.operations is None else tuple(spec.operations)
    return OpenApiSource(spec.document, spec.base_url, operations, auth)


def python_source(document: SourceDocument) -> PythonSource | None:
    """The `PythonSource` of a ``python`` or ``builtin`` document (`SourceSpecError` for
    a bad one), else ``None``."""
    if document.python is not None:
        spec = document.python
        return PythonSource(
            spec.module,
            None if spec.functions is None else tuple(spec.functions),
            tuple(spec.read_only),
            tuple(spec.idempotent),
        )
    if document.builtin is not None:
        return PythonSource.std(document.builtin.functions)
    return None


def _kind_issues(source: SourceDocument) -> list[ArtifactIssue]:
    kinds = [kind for kind in KINDS if getattr(source, kind)]
    if len(kinds) != 1:
        return [
            ArtifactIssue(
                ROOT_PLACE,
                "bad_binding",
                "a source has exactly one of stdio, http, python, builtin and openapi",
                "give `stdio: {command, ...}`, `http: {url, ...}`, `python: {module, ...}`, "
                "`builtin: {}` or `openapi: {document, base_url}`",
            )
        ]
    issues = []
    auth = source.openapi.auth if source.openapi is not None else None
    if auth is not None and (auth.header is None) == (auth.query is None):
        issues.append(
            ArtifactIssue(
                "openapi.auth",
                "bad_binding",
                "auth has exactly one of header and query",
                "give `auth: {header: NAME, secret: SECRET}` or `auth: {query: NAME, secret: ...}`",
            )
        )
    if source.builtin is not None:
        for index, name in enumerate(source.builtin.functions or []):
            if name not in BUILTIN_FUNCTIONS:
                issues.append(
                    ArtifactIssue(
                        f"builtin.functions[{index}]",
                        "builtin_unknown",
                        f"the standard library has no function {name!r}",
                        f"name one of {', '.join(BUILTIN_FUNCTIONS)}",
                    )
                )
    if source.python is not None:
        spec = source.python
        listed = set(spec.functions) if spec.functions is not None else None
        for field in ("read_only", "idempotent"):
            names = getattr(spec, field)
            for index, name in enumerate(names):
                if listed is not None and name not in listed:
                    issues.append(
                        ArtifactIssue(
                            f"python.{field}[{index}]",
                            "annotation_unknown",
                            f"{field} names {name!r}, which python.functions does not list",
                            "list the function in python.functions, or remove it here",
                        )
                    )
    lists = {
        "python.functions": source.python and source.python.functions,
        "python.read_only": source.python and source.python.read_only,
        "python.idempotent": source.python and source.python.idempotent,
        "builtin.functions": source.builtin and source.builtin.functions,
        "openapi.operations": source.openapi and source.openapi.operations,
    }
    for place, names in lists.items():
        if names and len(set(names)) != len(names):
            issues.append(ArtifactIssue(place, "duplicate", "a name is listed twice"))
    return issues


def load_source(text: str | bytes) -> ValidatedSource:
    """Read a registered source from YAML or JSON text and validate it."""
    return validate_source(read_document(text))


def validate_source(document: Mapping[str, Any] | Any) -> ValidatedSource:
    """Validate JSON data; `SourceSpecValidationError` lists every problem with its
    place."""
    issues = check_json_data(document)
    if not issues and not isinstance(document, dict):
        issues = [ArtifactIssue(ROOT_PLACE, "not_object", "a source is a JSON object")]
    if issues:
        raise SourceSpecValidationError(issues)
    try:
        source = SourceDocument.model_validate(document)
    except ValidationError as exc:
        raise SourceSpecValidationError(structure_issues(exc, document)) from None
    issues = _kind_issues(source)
    if issues:
        raise SourceSpecValidationError(issues)
    issues = reserved_secret_issues(source, ROOT_PLACE)
    if source.openapi is not None and source.openapi.auth is not None:
        reserved = source.openapi.auth.secret
        if reserved.startswith(RESERVED_PREFIX):
            issues.append(
                ArtifactIssue(
                    "openapi.auth.secret",
                    "secret_reserved",
                    f"secret {reserved} is the server's own configuration and is never resolvable",
                    "declare the credential under another name",
                )
            )
    for name in document_secrets(source):
        if name not in source.secrets:
            issues.append(
                ArtifactIssue(
                    "secrets",
                    "secret_undeclared",
                    f"secret {name} is referred to but not declared",
                    f"declare it: secrets: {{{name}: {{env: VARIABLE}}}}",
                )
            )
    for name, declared in source.secrets.items():
        variable = declared.env or name
        if variable.startswith(RESERVED_PREFIX):
            issues.append(
                ArtifactIssue(
                    f"secrets.{name}.env",
                    "secret_reserved",
                    f"variable {variable} is the server's own configuration",
                    "keep the credential in a variable of another name",
                )
            )
        if source.sessions is not None and declared.sessions is not None:
            outside = sorted(set(declared.sessions) - set(source.sessions))
            if outside:
                issues.append(
                    ArtifactIssue(
                        f"secrets.{name}.sessions",
                        "secret_sessions",
                        f"{len(outside)} session(s) may use the secret but not see the source",
                        "list only sessions of the source's `sessions`",
                    )
                )
    for field in ("allow_tools", "call_tools", "sessions"):
        values = getattr(source, field) or []
        if len(set(values)) != len(values):
            issues.append(ArtifactIssue(field, "duplicate", "a value is listed twice"))
    try:
        if source.openapi is not None:
            openapi_source(source.name, source.openapi, None)
        elif python_source(source) is None:
            identity_of(source)
    except SourceSpecError as exc:
        issues.append(ArtifactIssue(kind_of(source), "bad_source", str(exc)))
    if issues:
        raise SourceSpecValidationError(issues)
    data = source.model_dump(mode="json", exclude_defaults=True)
    data["format"] = SOURCE_FORMAT
    canonical = rfc8785.dumps(data)
    return ValidatedSource(source, canonical, hashlib.sha256(canonical).hexdigest())
