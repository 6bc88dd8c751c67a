"""Profiles with a KV pool of a chosen size, for tests that need memory to run short, or
without their model's context window, for tests that send prompts past it."""

from __future__ import annotations

from nightjar.profile.profile import Profile


def with_kv_blocks(profile: Profile, blocks: int, name: str) -> Profile:
    """A copy of ``profile`` named ``name`` whose KV pool holds ``blocks`` blocks beside
    its resident draft: the activation reserve takes up the rest of the device."""
    data = profile.to_json()
    facts = data["memory"]
    per_block = facts["block_size"] * (
        facts["target_kv_bytes_per_token"] + facts["draft_kv_bytes_per_token"]
    )
    usable = facts["device_bytes"] * facts["gpu_memory_utilization"]
    facts["activation_reserve_bytes"] = int(
        usable - facts["target_weight_bytes"] - facts["draft_weight_bytes"] - blocks * per_block
    )
    out = Profile.from_json(data, name)
    assert out.memory.kv_blocks(True) == blocks
    return out


def without_window(profile: Profile, name: str) -> Profile:
    """A copy of ``profile`` named ``name`` with no ``max_model_len``."""
    data = profile.to_json()
    del data["memory"]["max_model_len"]
    return Profile.from_json(data, name)
