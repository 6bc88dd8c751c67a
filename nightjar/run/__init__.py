"""A run's settings, and turning settings, a trace and a profile into a ready run."""
