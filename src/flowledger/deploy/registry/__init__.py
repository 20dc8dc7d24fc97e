"""The operator's source registry (docs/sources.md, "The source registry").

* `spec`: how a source is written (``stdio`` / ``http``, secrets by reference), shared
  by registered sources and a deployment's inline bindings;
* `document`: the registered source format ``flowledger.source/v1``;
* `store`: `SourceRegistry`, revisions under compare-and-swap, enable/disable, removal
  guarded by pinned runs, the last probe of each source;
* `access`: the trust model: `SourceAccess` (operator, tenant, read-only) and
  `SessionSources` (the registry as one session sees it);
* `errors`: the typed errors (``source_missing``, ``source_disabled``, ...);
* `reconcile`: a sources file (or directory) put into the registry, what ``--sources
  FILE`` of ``flowledger mcp|web|worker`` does at start;
* the capability catalog (docs/sources.md, "Capability catalog"): `catalog` (listings
  cached as probes, refreshed when due, searched), `ranking` (the ranked full-text
  index), `examples` (example arguments from an input schema), `calls` (trying a
  read-only tool), `audit` (the per-session log of those calls) and `tools` (the
  ``capability_*`` tool bundle).
"""
