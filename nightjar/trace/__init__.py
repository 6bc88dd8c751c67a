"""Request traces: the in-memory model, the JSON schema, named workloads, and the
formats of other tools (Azure, ShareGPT, Vidur, BurstGPT, vLLM benchmark datasets)."""
