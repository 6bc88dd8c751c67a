"""Bundled latency profiles (JSON)."""
