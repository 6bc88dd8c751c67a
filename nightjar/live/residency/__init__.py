"""Draft residency: the scheduler-side coordinator, the KV ballast, and weight parking."""
