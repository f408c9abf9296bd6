"""GGUF's quantized blocks unpacked into values and scales, nothing rounded (what quant_pack takes).

    q, scales = unpack(raw, fmt, rows, cols)    # raw: the tensor's bytes, (rows, row_bytes) uint8
    w ~ dequantize(q, scales)                   # the formula of fimgate/kernels/quant_pack.py

Each format's bit layout as ggml defines it (and gguf.quants reads it): Q4_0/Q4_1 keep value j
in the low nibble of byte j and value j + 16 in its high one; Q5_0/Q5_1 add bit 4 of value j as
bit j of a 32-bit word; Q8_0 is int8 (shifted here by 128 into an unsigned byte); Q4_K/Q5_K pack
eight 6-bit scales and mins in 12 bytes per 256 values, and sub-blocks 2p and 2p+1 share a
nibble byte; Q6_K keeps 4 low bits and 2 high bits of each value in separate planes and an int8
scale per 16 values.
"""

from __future__ import annotations

import numpy as np
from gguf.quants import Q4_K as _GgufQ4K

from fimgate.kernels.quant_pack import FORMATS, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0

BLOCK_BYTES = {Q4_0: 18, Q4_1: 20, Q5_0: 22, Q5_1: 24, Q8_0: 34, Q4_K: 144, Q5_K: 176, Q6_K: 210}
BLOCK_VALUES = {Q4_0: 32, Q4_1: 32, Q5_0: 32, Q5_1: 32, Q8_0: 32, Q4_K: 256, Q5_K: 256, Q6_K: 256}


def supported(fmt: int) -> bool:
    return fmt in FORMATS


def _f16(a: np.ndarray, rows: int) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.float16).reshape(rows, -1)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """(n, 16) bytes -> (n, 32): low nibbles then high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _bit4(qh: np.ndarray) -> np.ndarray:
    """(n, 4) bytes, a little-endian 32-bit word -> (n, 32): bit j, moved to bit 4."""
    bits = np.unpackbits(qh, axis=-1, bitorder="little")
    return (bits << 4).astype(np.uint8)


def unpack(raw: np.ndarray, fmt: int, rows: int, cols: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """raw: the tensor's bytes; returns q (rows, cols) uint8 and the format's scales, per row."""
    if fmt not in BLOCK_BYTES:
        raise ValueError(f"GGUF type {fmt} has no quantized kernel")
    nb = rows * cols // BLOCK_VALUES[fmt]
    b = np.ascontiguousarray(raw, dtype=np.uint8).reshape(nb, BLOCK_BYTES[fmt])
    if fmt == Q8_0:
        q = (b[:, 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        return q.reshape(rows, cols), {"d": _f16(b[:, :2], rows)}
    if fmt in (Q4_0, Q5_0):
        q = _nibbles(b[:, -16:])
        if fmt == Q5_0:
            q |= _bit4(b[:, 2:6])
        return q.reshape(rows, cols), {"d": _f16(b[:, :2], rows)}
    if fmt in (Q4_1, Q5_1):
        q = _nibbles(b[:, -16:])
        if fmt == Q5_1:
            q |= _bit4(b[:, 4:8])
        return q.reshape(rows, cols), {"d": _f16(b[:, :2], rows), "m": _f16(b[:, 2:4], rows)}
    if fmt in (Q4_K, Q5_K):
        sc, m = _GgufQ4K.get_scale_min(b[:, 4:16])
        qs = b[:, -128:].reshape(nb, 4, 32)  # sub-blocks 2p (low nibbles) and 2p + 1 (high)
        q = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(nb, 8, 32)
        if fmt == Q5_K:
            qh = b[:, 16:48].reshape(nb, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
            q |= (qh & 1) << 4
        scales = {"d": _f16(b[:, :2], rows), "dmin": _f16(b[:, 2:4], rows)}
        scales |= {"sc": sc.astype(np.uint8).reshape(rows, -1), "m": m.astype(np.uint8).reshape(rows, -1)}
        return q.reshape(rows, cols), scales
    # Q6_K: ql (128), qh (64), int8 scales (16), d (2)
    ql = b[:, :128].reshape(nb, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    ql = (ql & 0x0F).reshape(nb, 8, 32)
    qh = b[:, 128:192].reshape(nb, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    qh = (qh & 3).reshape(nb, 8, 32)
    q = (ql | (qh << 4)).astype(np.uint8)
    sc = np.ascontiguousarray(b[:, 192:208]).view(np.int8).reshape(rows, -1)
    return q.reshape(rows, cols), {"d": _f16(b[:, 208:210], rows), "sc": sc}


def dequantize(fmt: int, q: np.ndarray, scales: dict[str, np.ndarray]) -> np.ndarray:
    """The fp32 weight these values and scales stand for (tests compare it with gguf's own)."""
    rows, cols = q.shape
    qf = q.astype(np.float32).reshape(rows, cols // 32, 32)

    def per_block(a: np.ndarray, size: int) -> np.ndarray:  # (rows, cols/size) -> per block of 32
        return np.repeat(a.astype(np.float32), size // 32, axis=1)[:, :, None]

    if fmt in (Q4_0, Q5_0, Q8_0):
        c = {Q4_0: 8, Q5_0: 16, Q8_0: 128}[fmt]
        w = per_block(scales["d"], 32) * (qf - c)
    elif fmt in (Q4_1, Q5_1):
        w = per_block(scales["d"], 32) * qf + per_block(scales["m"], 32)
    elif fmt in (Q4_K, Q5_K):
        d, dmin = per_block(scales["d"], 256), per_block(scales["dmin"], 256)
        w = d * scales["sc"].astype(np.float32)[:, :, None] * qf - dmin * scales["m"].astype(np.float32)[:, :, None]
    else:
        s = np.repeat(scales["d"].astype(np.float32), 16, axis=1) * scales["sc"].astype(np.float32)
        w = s.reshape(rows, cols // 16, 1) * (q.astype(np.float32).reshape(rows, cols // 16, 16) - 32)
    return w.reshape(rows, cols)
