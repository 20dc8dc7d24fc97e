"""Artifacts: the `flowledger.artifact/v1` models, reading YAML and JSON, expressions, the
static checks and the store.

The public names are re-exported by `flowledger.deploy`.
"""
