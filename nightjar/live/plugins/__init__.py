"""The classes vLLM loads by name: scheduler, worker, and the engine arguments naming them."""
