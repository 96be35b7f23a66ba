"""A small PNG reader for asserting that a screenshot is a real, non-blank image."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: bytes per pixel of 8-bit PNG colour types (grey, RGB, palette, grey+alpha, RGBA).
BYTES_PER_PIXEL = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


@dataclass(frozen=True)
class PngSummary:
    width: int
    height: int
    distinct_byte_values: int


def read_png(path: Path) -> PngSummary:
    """Parses ``path`` as an 8-bit PNG; raises ``ValueError`` naming what is wrong.

    Checks the signature, every chunk's CRC, that the image data decompresses to
    exactly ``height`` rows, and counts the distinct byte values of the pixel data
    (a blank page has very few).
    """
    data = path.read_bytes()
    if not data.startswith(SIGNATURE):
        raise ValueError(f"{path} does not start with the PNG signature")
    position, header, image = len(SIGNATURE), None, bytearray()
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"{path}: chunk {kind!r} at byte {position} has a bad CRC")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            image += body
        elif kind == b"IEND":
            break
        position += 12 + length
    if header is None:
        raise ValueError(f"{path} has no IHDR chunk")
    width, height, depth, colour = header[:4]
    if depth != 8 or colour not in BYTES_PER_PIXEL:
        raise ValueError(f"{path}: bit depth {depth}, colour type {colour} not supported here")
    pixels = zlib.decompress(bytes(image))
    expected = height * (1 + width * BYTES_PER_PIXEL[colour])
    if len(pixels) != expected:
        raise ValueError(f"{path}: {len(pixels)} bytes of image data, expected {expected}")
    return PngSummary(width, height, len(set(pixels)))
