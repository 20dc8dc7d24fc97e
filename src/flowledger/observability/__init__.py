"""Observability: what flowledger tells the tools operators already run (docs/observability.md).

A bottom-level utility like `flowledger.clock`, importable from every layer; no module
here imports an optional library until it is used.
"""
