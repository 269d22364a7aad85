"""The GGUF file header (llama.cpp's model format): its metadata and tensor table, read with
the standard library alone, without touching tensor data. Resolving a ``.gguf`` model
(``zoo.llm.spec_from_gguf``) and the llama.cpp backend both read it here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: GGUF value type -> struct format of a scalar (8: string, 9: array are handled apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF's metadata scalars (arrays by their length only) and its tensor table."""

    version: int
    kv: dict[str, Any]
    #: name -> (ggml dimensions, ggml type id, offset in the data section)
    tensors: dict[str, tuple[tuple[int, ...], int, int]]
    #: where the data section starts in the file (after the header, aligned)
    data_start: int = 0


def read_gguf_header(path: str | os.PathLike) -> GGUFHeader:
    """Read a GGUF's header, key/values and tensor table without touching tensor data
    (``gguf.GGUFReader`` decodes every vocabulary string: seconds for a 50k vocabulary).
    A file that is not a complete GGUF header raises ValueError."""
    import mmap
    import struct

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos = 0

        def take(fmt: str) -> Any:
            nonlocal pos
            v = struct.unpack_from("<" + fmt, buf, pos)
            pos += struct.calcsize("<" + fmt)
            return v[0]

        def text() -> str:
            nonlocal pos
            n = take("Q")
            if pos + n > len(buf):
                raise ValueError("string runs past the end of the file")
            pos += n
            return bytes(buf[pos - n:pos]).decode("utf-8", "replace")

        def skip(vtype: int, count: int) -> None:
            nonlocal pos
            if vtype == 8:
                for _ in range(count):
                    pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
            elif vtype in _SCALARS:
                pos += struct.calcsize("<" + _SCALARS[vtype]) * count
            else:
                raise ValueError(f"unknown GGUF value type {vtype}")

        try:
            if bytes(buf[:4]) != b"GGUF":
                raise ValueError("no GGUF magic")
            pos = 4
            version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
            kv: dict[str, Any] = {}
            for _ in range(n_kv):
                key, vtype = text(), take("I")
                if vtype == 8:
                    kv[key] = text()
                elif vtype == 9:
                    etype, count = take("I"), take("Q")
                    skip(etype, count)
                    kv[key] = ("array", count)
                elif vtype in _SCALARS:
                    kv[key] = take(_SCALARS[vtype])
                else:
                    raise ValueError(f"unknown GGUF value type {vtype}")
            tensors: dict[str, tuple[tuple[int, ...], int, int]] = {}
            for _ in range(n_tensors):
                name, n_dims = text(), take("I")
                dims = tuple(take("Q") for _ in range(n_dims))
                tensors[name] = (dims, take("I"), take("Q"))
        except struct.error:
            raise ValueError("the header runs past the end of the file") from None
        align = kv.get("general.alignment", 32)
        align = align if isinstance(align, int) and align > 0 else 32
        return GGUFHeader(version, kv, tensors, -(-pos // align) * align)


__all__ = ["GGUFHeader", "read_gguf_header"]
