"""Profiles: what a GPU + target + draft pair costs per step, the file format and its
checks, prefill pricing, and the priors policies may be given instead of the truth."""
