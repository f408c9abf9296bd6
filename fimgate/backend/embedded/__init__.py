"""The embedded engine: one process, CPU or CUDA. Per-user prefix trees of KV blocks, keystroke
pins, suffix-KV correction (shifted reuse + recompute), the decode loop with token healing and stop
rules, CUDA graphs.
May import: fimgate.backend, fimgate.backend.model, fimgate.kernels.
"""
