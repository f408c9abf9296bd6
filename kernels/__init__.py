"""Numeric primitives under the backends: RoPE application and re-rotation (torch reference)."""
