"""A produced batch's records, decompressed with a bound on their size.

Kafka reads a compressed batch as a stream, record by record, so a small batch of compressed
zeros claiming one record costs it a few KB. This server walks the whole decompressed body, so
it bounds the body instead: no batch may decompress to more than `limit` bytes (the broker
passes socket.request.max.bytes, the most an uncompressed batch could ever carry). Each codec
stops producing output one byte past the limit; a decompression bomb costs at most that much
memory and time, and is refused. Kafka's codecs: 1 gzip, 2 snappy (raw, or xerial's framing
as the Java client writes it), 3 lz4 (frames), 4 zstd (frames).
"""

from __future__ import annotations

import struct
import zlib

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16
_BLOCK = struct.Struct(">i")
_STEP = 1 << 20


class TooLarge(Exception):
    """The body decompresses to more than the limit."""


def decompress(compression: int, data: bytes, limit: int) -> bytes:
    """The decompressed body; TooLarge past `limit` bytes, another exception if damaged."""
    if compression == 1:
        return _gzip(data, limit)
    if compression == 2:
        if _snappy_size(data) > limit:
            raise TooLarge
        import kafka.codec

        return bytes(kafka.codec.snappy_decode(data))
    if compression == 3:
        return _lz4(data, limit)
    if compression == 4:
        return _zstd(data, limit)
    raise ValueError(f"unknown compression type {compression}")


def _gzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    rest = data
    while rest:  # gzip members one after another, as GzipFile reads them
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += member.decompress(rest, limit + 1 - len(out))
        if len(out) > limit or member.unconsumed_tail:
            raise TooLarge
        if not member.eof:
            raise zlib.error("the gzip stream is cut off")
        rest = member.unused_data
    return bytes(out)


def _lz4(data: bytes, limit: int) -> bytes:
    import lz4.frame

    out = bytearray()
    rest = data
    while rest:  # one frame after another
        frame = lz4.frame.LZ4FrameDecompressor()
        out += frame.decompress(rest, max_length=limit + 1 - len(out))
        if len(out) > limit:
            raise TooLarge
        if not frame.eof:
            raise ValueError("the lz4 frame is cut off")
        rest = frame.unused_data
    return bytes(out)


def _zstd(data: bytes, limit: int) -> bytes:
    import zstandard

    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(min(_STEP, limit + 1 - len(out)))
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > limit:
                raise TooLarge


def _snappy_size(data: bytes) -> int:
    """What a snappy body declares it decompresses to: each raw block starts with its size."""
    if not data.startswith(XERIAL_MAGIC):
        return _varint(data, 0)
    total, at = 0, XERIAL_HEADER
    while at + _BLOCK.size <= len(data):
        (size,) = _BLOCK.unpack_from(data, at)
        at += _BLOCK.size
        if size <= 0:
            break  # damaged: the codec says so
        total += _varint(data, at)
        at += size
    return total


def _varint(data: bytes, at: int) -> int:
    value = shift = 0
    for byte in data[at : at + 5]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    return value
