"""Device-side data movement (KV block migration, weight packing): plan, Triton, torch.

Kept import-light: :mod:`nightjar.live.kernels.compaction` runs in the scheduler process
without torch; :mod:`nightjar.live.kernels.ops` dispatches the copies.
"""
