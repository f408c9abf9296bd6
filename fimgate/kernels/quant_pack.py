"""Quantized weights in the layout fimgate/kernels/quant_gemv.c reads: groups of 16 interleaved rows.

    packed = pack(fmt, q, d=..., ...)     # numpy uint8, quant_group_bytes(fmt, cols) per 16 rows

The input is a weight in its format's own terms, already unpacked from the file's bit layout
(fimgate/backend/model/gguf_blocks.py): `q` (rows, cols) uint8, each value unsigned (Q8_0's int8
shifted by 128), and the format's scales, unchanged:

    format        w =                          scales given (per row)
    Q4_0 Q5_0 Q8_0 d * (q - 8 | 16 | 128)         d (cols/32,) fp16
    Q4_1 Q5_1      d * q + m                      d, m (cols/32,) fp16
    Q4_K Q5_K      d * sc * q - dmin * m          d, dmin (cols/256,) fp16; sc, m (cols/32,) uint8
    Q6_K           d * sc * (q - 32)              d (cols/256,) fp16; sc (cols/16,) int8

Nothing is rounded: the packed matrix holds the same numbers as the file, in the same bytes
give or take the scales' alignment (Q4_K 4.625 bits a weight against the file's 4.5). Rows past
the last full group are zero. The layout is drawn in quant_gemv.c's header.
"""

from __future__ import annotations

import numpy as np

Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K = 2, 3, 6, 7, 8, 12, 13, 14  # gguf.GGMLQuantizationType
FORMATS = {Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1", Q8_0: "Q8_0", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K"}
BITS = {Q4_0: 4, Q4_1: 4, Q5_0: 5, Q5_1: 5, Q8_0: 8, Q4_K: 4, Q5_K: 5, Q6_K: 6}
K_FORMATS = (Q4_K, Q5_K, Q6_K)
ROWS = 16  # rows per group
BLOCK = 32  # values per block
SUPER = 256  # values per K super-block


def super_block(fmt: int) -> int:
    """The values each of a row's scale records covers: 256 for K formats, else 32."""
    return SUPER if fmt in K_FORMATS else BLOCK


def group_bytes(fmt: int, cols: int) -> int:
    """What quant_gemv.c's quant_group_bytes says, without loading it."""
    nb = cols // BLOCK
    scale = 64 if fmt in (Q4_1, Q5_1) else 32
    high = {5: 64, 6: 128}.get(BITS[fmt], 0)
    values = 512 if BITS[fmt] == 8 else 256
    header = 32 if fmt == Q6_K else 64 if fmt in K_FORMATS else 0
    return nb * (scale + high + values) + (nb * BLOCK // SUPER) * header


def _by_group(a: np.ndarray, groups: int) -> np.ndarray:
    """(rows, ...) -> (groups, 16, ...), zero rows added at the end."""
    pad = groups * ROWS - a.shape[0]
    if pad:
        a = np.concatenate([a, np.zeros((pad,) + a.shape[1:], a.dtype)])
    return a.reshape((groups, ROWS) + a.shape[1:])


def _rows_last(a: np.ndarray) -> np.ndarray:
    """(G, 16, nb, ...) -> (G, nb, ..., 16): one value of each row side by side."""
    return np.moveaxis(a, 1, -1)


def _value_bytes(q: np.ndarray, bits: int) -> np.ndarray:
    """q (G, 16, nb, 32) -> (G, nb, 256 | 512): chunk vectors, lane r = 4 values of row r."""
    g, _, nb, _ = q.shape
    if bits == 8:
        return q.reshape(g, ROWS, nb, 8, 4).transpose(0, 2, 3, 1, 4).reshape(g, nb, 512)
    lo = q[..., :16] & 0x0F
    hi = q[..., 16:] & 0x0F
    byte = (lo | (hi << 4)).reshape(g, ROWS, nb, 4, 4)
    return byte.transpose(0, 2, 3, 1, 4).reshape(g, nb, 256)


def _high_bytes(q: np.ndarray, bits: int) -> np.ndarray:
    """The bits above the low nibble: (G, nb, 0 | 64 | 128)."""
    g, _, nb, _ = q.shape
    if bits == 5:
        top = ((q >> 4) & 1).reshape(g, ROWS, nb, 8, 4).astype(np.uint8)  # chunk c, value i
        byte = np.zeros((g, ROWS, nb, 4), np.uint8)
        for c in range(8):
            byte |= top[:, :, :, c, :] << np.uint8(c)
        return byte.transpose(0, 2, 1, 3).reshape(g, nb, 64)
    if bits == 6:
        top = ((q >> 4) & 3).reshape(g, ROWS, nb, 2, 4, 4).astype(np.uint8)  # half, chunk in half, value
        byte = np.zeros((g, ROWS, nb, 2, 4), np.uint8)
        for c in range(4):
            byte |= top[:, :, :, :, c, :] << np.uint8(2 * c)
        return byte.transpose(0, 2, 3, 1, 4).reshape(g, nb, 128)
    return np.zeros((g, nb, 0), np.uint8)


def _f16_bytes(a: np.ndarray) -> np.ndarray:
    """(G, 16, n) fp16 -> (G, n, 32) bytes."""
    return np.ascontiguousarray(_rows_last(a.astype(np.float16))).view(np.uint8)


def pack(fmt: int, q: np.ndarray, **scales: np.ndarray) -> np.ndarray:
    """The packed matrix: uint8, (ceil(rows / 16) * group_bytes(fmt, cols),)."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt} has no kernel")
    rows, cols = q.shape
    if cols % super_block(fmt):
        raise ValueError(f"{FORMATS[fmt]} rows of {cols} values are not whole blocks")
    groups = -(-rows // ROWS)
    nb = cols // BLOCK
    qg = _by_group(q.astype(np.uint8).reshape(rows, nb, BLOCK), groups)
    parts = []
    if fmt in K_FORMATS:
        per = {k: _by_group(v, groups) for k, v in scales.items()}
        if fmt == Q6_K:
            sc = per["sc"].reshape(groups, ROWS, nb, 2).view(np.uint8)
            parts.append(np.moveaxis(sc, 1, -1).reshape(groups, nb, 32))
            header = _f16_bytes(per["d"])
        else:
            parts.append(np.concatenate([_rows_last(per["sc"]), _rows_last(per["m"])], axis=-1).astype(np.uint8))
            header = np.concatenate([_f16_bytes(per["d"]), _f16_bytes(per["dmin"])], axis=-1)
    else:
        parts.append(_f16_bytes(_by_group(scales["d"], groups)))
        if fmt in (Q4_1, Q5_1):
            parts.append(_f16_bytes(_by_group(scales["m"], groups)))
        header = None
    parts += [_high_bytes(qg, BITS[fmt]), _value_bytes(qg, BITS[fmt])]
    records = np.concatenate([np.ascontiguousarray(p).reshape(groups, nb, -1) for p in parts], axis=-1)
    if header is not None:
        nsb = cols // SUPER
        records = np.concatenate([header.reshape(groups, nsb, -1), records.reshape(groups, nsb, -1)], axis=-1)
    out = np.ascontiguousarray(records).reshape(-1)
    assert out.size == groups * group_bytes(fmt, cols)
    return out
