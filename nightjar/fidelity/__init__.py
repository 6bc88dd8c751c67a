"""Simulator against reality: replaying live runs and judging agreement."""
