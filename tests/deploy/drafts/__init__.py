"""Drafts: the store, JSON Patch, focused edits, publishing, explain, the MCP loop."""
