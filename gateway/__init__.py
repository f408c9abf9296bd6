"""The HTTP gateway: OpenAI /v1/completions, llama.cpp /infill, health, models, metrics."""
