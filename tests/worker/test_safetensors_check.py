from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save

from worker.safetensors_check import SafetensorsError, check_safetensors, check_safetensors_file


def _file(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(body)
    return path


def _with_header(header: dict[str, object], data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_a_real_file_passes(tmp_path: Path) -> None:
    body = save({"a": torch.zeros(4, 2), "b": torch.ones(3, dtype=torch.bfloat16)}, metadata={"format": "pt"})
    assert check_safetensors_file(_file(tmp_path, body)) == 2


def test_a_ranged_reader_reads_only_the_header() -> None:
    body = save({"a": torch.zeros(1000, 100)})
    reads: list[tuple[int, int]] = []

    def read(start: int, length: int) -> bytes:
        reads.append((start, length))
        return body[start : start + length]

    assert check_safetensors(read, len(body)) == 1
    assert reads[0] == (0, 8)
    assert sum(length for _, length in reads) < 200


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (save({"a": torch.zeros(4, 2)})[:-1], "ends at byte 32 of the data but the file holds only 31 bytes"),
        (save({"a": torch.zeros(4, 2)})[:20], "it is truncated or not a safetensors file"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "it is truncated or not a safetensors file"),
        (b"abc", "too short for a safetensors header"),
        (struct.pack("<Q", 4) + b"{no}", "its header is not valid JSON"),
        (
            _with_header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8),
            "out of order",
        ),
        (
            _with_header({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, b"\0" * 8),
            "should take 16 bytes but its data_offsets span 8",
        ),
        (_with_header({"a": {"dtype": "F32"}}, b""), "malformed shape or data_offsets"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
    ],
    ids=[
        "truncated-data",
        "truncated-header",
        "garbage",
        "tiny",
        "bad-json",
        "order",
        "span",
        "fields",
        "list",
    ],
)
def test_a_broken_file_is_refused_saying_why(tmp_path: Path, body: bytes, problem: str) -> None:
    with pytest.raises(SafetensorsError, match=problem):
        check_safetensors_file(_file(tmp_path, body))
