"""Bundled traces (JSON)."""
