"""Drafts: per-session, revisioned artifact documents a model edits step by step.

A draft holds a `flowledger.artifact/v1` document that may be invalid, with the
diagnostics of its last edit, under contiguous revisions 1, 2, 3, ... (`DraftStore`).
Edits are RFC 6902 JSON Patches applied atomically under compare-and-swap on the
revision (`apply_patch`), or focused edits that compute such a patch (`edits`).
Publishing saves an immutable artifact version and, on request, a deployment
(`DraftService.publish`). `explain` answers cause, fix and example for every code the
deploy layer emits. `DraftTools` serves all of it as tools (docs/deploy.md, "Drafts").
"""
