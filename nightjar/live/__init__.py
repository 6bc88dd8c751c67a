"""vLLM V1 integration (installed as nightjar.live)."""
