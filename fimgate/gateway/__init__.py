"""The gateway: the HTTP app (OpenAI /v1/completions, llama.cpp /infill, models, health, metrics),
API keys, and the CompletionService that composes the planner and a backend for every front end.
May import: fimgate.efim, fimgate.backend (and its engines, to build one).
"""
