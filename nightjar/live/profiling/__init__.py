"""Measuring the engine: the profiler, its worker probe, table building, step-time priors."""
