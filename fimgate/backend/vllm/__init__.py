"""vLLM as the backend: token ids + a per-tenant cache salt to one or many vLLM servers, prefix-aware
routing from per-user trees, and the KV-connector plugin (`pin_connector.py`) that vLLM loads to
honour keystroke pins. It serves the exact reuse classes only (no shifted reuse).
May import: fimgate.backend. `pin_connector.py` runs inside vLLM and imports vllm, nothing else here.
"""
