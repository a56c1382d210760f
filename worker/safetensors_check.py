"""A cheap integrity check of a .safetensors file: its header, without reading any tensor.

The format is an 8-byte little-endian header length, a JSON header mapping each tensor to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to the end of the
header), then the tensor bytes. A truncated upload or a file that is not safetensors at all
shows up here as a header that does not parse or offsets past the end of the file.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from pathlib import Path

# Real headers are at most a few MB (tens of thousands of tensors); the safetensors library
# itself refuses headers over 100 MB.
MAX_HEADER_BYTES = 100_000_000
# Bytes per element, for the dtypes whose size is a whole number of bytes.
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}

# read(start, length) -> exactly those bytes of the file (fewer only at its end).
ReadRange = Callable[[int, int], bytes]


class SafetensorsError(ValueError):
    """The file is not a complete safetensors file; the message says what is wrong."""


def check_safetensors(read: ReadRange, size: int) -> int:
    """Check the header of a safetensors file of ``size`` bytes; returns its tensor count."""
    if size < 8:
        raise SafetensorsError(f"it is {size} bytes, too short for a safetensors header")
    (header_length,) = struct.unpack("<Q", read(0, 8))
    if header_length > MAX_HEADER_BYTES or 8 + header_length > size:
        raise SafetensorsError(
            f"its header length field says {header_length} bytes but the file is {size} bytes; "
            "it is truncated or not a safetensors file"
        )
    raw = read(8, header_length)
    if len(raw) != header_length:
        raise SafetensorsError(f"its {header_length}-byte header could not be read (the file ends early)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SafetensorsError(f"its header is not valid JSON ({error}); not a safetensors file") from error
    if not isinstance(header, dict):
        raise SafetensorsError("its header is not a JSON object; not a safetensors file")
    data_bytes = size - 8 - header_length
    count = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        count += 1
        _check_tensor(name, info, data_bytes)
    return count


def _check_tensor(name: str, info: object, data_bytes: int) -> None:
    if not isinstance(info, dict):
        raise SafetensorsError(f"tensor {name!r} has no dtype/shape/data_offsets entry")
    offsets = info.get("data_offsets")
    shape = info.get("shape")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in offsets)
        or not isinstance(shape, list)
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)
    ):
        raise SafetensorsError(f"tensor {name!r} has a malformed shape or data_offsets")
    begin, end = offsets
    if not 0 <= begin <= end:
        raise SafetensorsError(f"tensor {name!r} has data_offsets [{begin}, {end}] out of order")
    if end > data_bytes:
        raise SafetensorsError(
            f"tensor {name!r} ends at byte {end} of the data but the file holds only {data_bytes} "
            "bytes of tensor data; the file is truncated"
        )
    element_bytes = DTYPE_BYTES.get(str(info.get("dtype")))
    if element_bytes is not None and end - begin != math.prod(shape) * element_bytes:
        raise SafetensorsError(
            f"tensor {name!r} ({info.get('dtype')} {shape}) should take "
            f"{math.prod(shape) * element_bytes} bytes but its data_offsets span {end - begin}"
        )


def check_safetensors_file(path: Path) -> int:
    """check_safetensors on a local file."""
    with path.open("rb") as handle:

        def read(start: int, length: int) -> bytes:
            handle.seek(start)
            return handle.read(length)

        return check_safetensors(read, path.stat().st_size)
