"""Deployments: the `flowledger.deployment/v1` document and its revisions, pins, validation,
the deployed definition, the service and its tools.

The public names are re-exported by `flowledger.deploy`.
"""
