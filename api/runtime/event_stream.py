"""AWS event-stream framing (application/vnd.amazon.eventstream), as InvokeEndpointWithResponseStream
answers: one PayloadPart event per chunk, or a ModelStreamError exception event.

A message is: total length and headers length (4-byte big-endian each), the CRC32 of those
8 bytes, the headers (1-byte name length, name, type 7 = string, 2-byte value length, value),
the payload, and the CRC32 of everything before it. botocore's EventStream parser checks both.
"""

from __future__ import annotations

import json
import struct
import zlib

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7


def _headers(headers: dict[str, str]) -> bytes:
    encoded = b""
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode(), value.encode()
        encoded += struct.pack(">B", len(name_bytes)) + name_bytes
        encoded += struct.pack(">BH", _STRING, len(value_bytes)) + value_bytes
    return encoded


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    header_bytes = _headers(headers)
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + header_bytes + payload
    return message + struct.pack(">I", zlib.crc32(message))


def payload_part(data: bytes) -> bytes:
    return encode_message(
        {":event-type": "PayloadPart", ":message-type": "event", ":content-type": "application/octet-stream"},
        data,
    )


def model_stream_error(message: str, error_code: str) -> bytes:
    return encode_message(
        {
            ":exception-type": "ModelStreamError",
            ":message-type": "exception",
            ":content-type": "application/json",
        },
        json.dumps({"Message": message, "ErrorCode": error_code}).encode(),
    )
