"""Numeric primitives under the backends: RoPE application and re-rotation (torch reference, Triton on
CUDA) and the CPU C kernels (`*.c`, built on first use by `cpu_build.py`; torch does the work where
there is no compiler or no source).
May import: nothing else in fimgate.
"""
