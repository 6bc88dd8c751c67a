"""The live benchmark: policies run in rotated, interleaved rounds on shared engines."""
