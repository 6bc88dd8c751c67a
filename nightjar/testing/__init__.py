"""Test utilities, not part of Nightjar's API: used by tests/ and benchmarks/ only.

They ship with the package so that benchmarks and the test suite run against an
installed copy; nothing under ``nightjar`` proper imports them.
"""
