"""A GGUF file's metadata and tensors, read the fast way.

    f = GGUFFile(path)
    f.fields["general.architecture"]      # "qwen2": plain Python values (str, int, float, bool, list)
    t = f.tensors[0]; t.name, t.tensor_type, t.shape, t.data   # data: a read-only view of the mapped file

gguf-py's GGUFReader builds a numpy memmap slice for every element of every metadata array:
Qwen2.5's 151,936 tokens and 151,387 merges took it 11-17 s per load on the development machine.
This reads the same format (version 2 and 3) from the bytes with `struct`, in well under a
second, and maps the tensor data once. Shapes and data follow GGUFReader's conventions (shape
is ggml's ne, innermost first; data is shaped outermost first, quantized rows as bytes), so
gguf.quants.dequantize takes `t.data` as it is.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
_PLAIN = {0: np.float32, 1: np.float16, 30: np.uint16}  # F32, F16, BF16 (as its bits)


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    tensor_type: GGMLQuantizationType
    shape: tuple[int, ...]  # ne: innermost (columns) first
    data: np.ndarray
    n_bytes: int


class GGUFError(ValueError):
    pass


class GGUFFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self._map = np.memmap(path, dtype=np.uint8, mode="r")
        buf = memoryview(self._map)
        if bytes(buf[:4]) != b"GGUF":
            raise GGUFError(f"{path} is not a GGUF file")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
        if version not in (2, 3):
            raise GGUFError(f"GGUF version {version} is not supported")
        self._buf, self._pos = buf, 24
        self.fields: dict[str, object] = {}
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            self.fields[key] = self._value(vtype)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            dims = self._unpack(f"<{n_dims}Q")
            ttype, offset = self._unpack("<IQ")
            infos.append((name, tuple(int(d) for d in dims), ttype, offset))
        align = int(self.fields.get("general.alignment", 32))
        start = -(-self._pos // align) * align
        self.tensors = [self._tensor(name, dims, ttype, start + offset) for name, dims, ttype, offset in infos]
        del self._buf

    def _unpack(self, fmt: str) -> tuple:
        out = struct.unpack_from(fmt, self._buf, self._pos)
        self._pos += struct.calcsize(fmt)
        return out

    def _string(self) -> str:
        (n,) = struct.unpack_from("<Q", self._buf, self._pos)
        s = bytes(self._buf[self._pos + 8 : self._pos + 8 + n]).decode("utf-8", errors="replace")
        self._pos += 8 + n
        return s

    def _value(self, vtype: int):
        if vtype in _SCALARS:
            return self._unpack(_SCALARS[vtype])[0]
        if vtype == _STRING:
            return self._string()
        if vtype != _ARRAY:
            raise GGUFError(f"unknown GGUF value type {vtype}")
        etype, n = self._unpack("<IQ")
        if etype in _NUMPY:
            a = np.frombuffer(self._buf, dtype=_NUMPY[etype], count=n, offset=self._pos)
            self._pos += a.nbytes
            return a.tolist()
        if etype == _STRING:
            buf, pos, out = self._buf, self._pos, []
            for _ in range(n):
                (size,) = struct.unpack_from("<Q", buf, pos)
                out.append(str(buf[pos + 8 : pos + 8 + size], "utf-8", errors="replace"))
                pos += 8 + size
            self._pos = pos
            return out
        return [self._value(etype) for _ in range(n)]

    def _tensor(self, name: str, dims: tuple[int, ...], ttype: int, at: int) -> GGUFTensor:
        qtype = GGMLQuantizationType(ttype)
        block_values, block_bytes = GGML_QUANT_SIZES[qtype]
        count = int(np.prod(dims)) if dims else 1
        n_bytes = count // block_values * block_bytes
        raw = self._map[at : at + n_bytes]
        outer = tuple(reversed(dims))
        if ttype in _PLAIN:
            data = raw.view(_PLAIN[ttype]).reshape(outer)
        else:
            data = raw.reshape(outer[:-1] + (dims[0] // block_values * block_bytes,))
        return GGUFTensor(name, qtype, dims, data, n_bytes)
