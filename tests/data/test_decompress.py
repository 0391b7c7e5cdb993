"""Compressed batches decompress with a bound: the codecs agree with kafka-python's on every
body a producer makes, and a decompression bomb is refused after at most the bound."""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

import kafka.codec
import pytest
import zstandard
from crc32c import crc32c
from datakit import NOW, batch, records
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from minicoord.protocol.errors import ErrorCode
from minicoord.server.data.decompress import TooLarge, decompress
from minicoord.server.data.validate import InvalidBatch, Limits, check_produced
from minicoord.server.process import start_server_process
from minicoord.storage.batch import ATTRIBUTES_AT, CRC_AT, HEADER_SIZE

ENCODE = {
    1: kafka.codec.gzip_encode,
    2: kafka.codec.snappy_encode,
    3: kafka.codec.lz4_encode,
    4: kafka.codec.zstd_encode,
}
DECODE = {
    1: kafka.codec.gzip_decode,
    2: kafka.codec.snappy_decode,
    3: kafka.codec.lz4_decode,
    4: kafka.codec.zstd_decode,
}
BODIES = [b"", b"x", os.urandom(100_000), b"abc" * 50_000, bytes(300_000)]


# Every codec with every body, but snappy with nothing: kafka-python cannot read back its own
# snappy of no bytes either (it is not a stream any producer sends).
CASES = [
    pytest.param(codec, body, id=f"{name}-{label}")
    for codec, name in ((1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd"))
    for body, label in zip(BODIES, ("empty", "one", "random", "repeats", "zeros"), strict=True)
    if body or codec != 2
]


@pytest.mark.parametrize(("codec", "body"), CASES)
def test_each_codec_gives_what_kafka_python_gives(codec: int, body: bytes) -> None:
    packed = ENCODE[codec](body)
    assert decompress(codec, packed, len(body)) == body
    assert kafka_decode(codec, packed) == body
    if body:
        with pytest.raises(TooLarge):
            decompress(codec, packed, len(body) - 1)


def test_bodies_in_several_members_frames_or_blocks_decompress_whole() -> None:
    body = os.urandom(50_000) + bytes(50_000)
    half = len(body) // 2
    gzip_members = kafka.codec.gzip_encode(body[:half]) + kafka.codec.gzip_encode(body[half:])
    assert decompress(1, gzip_members, len(body)) == body
    xerial = kafka.codec.snappy_encode(body, xerial_compatible=True, xerial_blocksize=4096)
    assert decompress(2, xerial, len(body)) == body
    with pytest.raises(TooLarge):
        decompress(2, xerial, len(body) - 1)
    raw = kafka.codec.snappy_encode(body, xerial_compatible=False)
    assert decompress(2, raw, len(body)) == body
    lz4_frames = kafka.codec.lz4_encode(body[:half]) + kafka.codec.lz4_encode(body[half:])
    assert decompress(3, lz4_frames, len(body)) == body
    zstd_frames = kafka.codec.zstd_encode(body[:half]) + kafka.codec.zstd_encode(body[half:])
    assert decompress(4, zstd_frames, len(body)) == body


def kafka_decode(codec: int, packed: bytes) -> bytes:
    return bytes(DECODE[codec](packed))


def _zstd_zeros(n: int) -> bytes:
    """n zeros as one zstd frame, compressed a MiB at a time (never n bytes in memory)."""
    out = zstandard.ZstdCompressor().compressobj()
    chunk = bytes(1 << 20)
    parts = [out.compress(chunk) for _ in range(n >> 20)]
    return b"".join(parts) + out.flush()


def _bomb(body: bytes, codec: int) -> bytes:
    """A batch claiming one record whose compressed body is `body`."""
    data = bytearray(batch(records(1), compression=codec))
    data[HEADER_SIZE:] = body
    struct.pack_into(">i", data, 8, len(data) - 12)
    # The builder leaves a batch this small uncompressed: say the codec.
    struct.pack_into(">h", data, ATTRIBUTES_AT, codec)
    struct.pack_into(">I", data, CRC_AT, crc32c(memoryview(data)[ATTRIBUTES_AT:]))
    return bytes(data)


def test_a_batch_past_the_bound_is_invalid_record_before_its_records_are_walked() -> None:
    limits = Limits(1 << 20, 1 << 30, False, False, 2**63 - 1, 3_600_000, 1 << 20)
    bomb = _bomb(_zstd_zeros(64 << 20), 4)  # 64 MiB of zeros in 2 KB
    assert len(bomb) < 4 << 10
    with pytest.raises(InvalidBatch) as refused:
        check_produced(bomb, limits, NOW, 9)
    assert refused.value.error is ErrorCode.INVALID_RECORD
    assert "decompresses to more than 1048576 bytes" in refused.value.message
    # A real batch under the bound still goes through.
    _out, info = check_produced(batch(records(100), compression=4), limits, NOW, 9)
    assert info.records == 100


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def _ask(sock: socket.socket, request: Any, version: int, response: Any) -> Any:
    request.with_header(correlation_id=1, client_id="bomb-test")
    body = bytes(request.encode(header=True))
    sock.sendall(struct.pack(">i", len(body)) + body)
    frame = b""
    size = None
    while size is None or len(frame) < size:
        chunk = sock.recv(1 << 16)
        assert chunk, "the server closed the connection"
        frame += chunk
        if size is None and len(frame) >= 4:
            size = struct.unpack_from(">i", frame)[0]
            frame = frame[4:]
    return response.decode(memoryview(frame)[5:], version=version)  # correlation id, tags


def test_a_decompression_bomb_over_a_socket_costs_the_server_at_most_the_bound() -> None:
    # 1 GiB of zeros (32 KB compressed) against a server whose requests may be 8 MiB: the
    # server decompresses at most 8 MiB of it, refuses it, and answers the next request.
    bomb = _bomb(_zstd_zeros(1 << 30), 4)
    server = start_server_process({"socket.request.max.bytes": 8 << 20}, topics=[("bombed", 1)])
    try:
        before = _peak_rss_kib(server.proc.pid)
        with socket.create_connection((server.host, server.port), timeout=30) as sock:
            part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bomb)
            topic = ProduceRequest.TopicProduceData(name="bombed", partition_data=[part])
            request = ProduceRequest(
                version=9, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[topic]
            )
            answer = _ask(sock, request, 9, ProduceResponse)
            partition = answer.responses[0].partition_responses[0]
            assert partition.error_code == ErrorCode.INVALID_RECORD
            # As Kafka answers a batch it refuses whole: no message, the error's own text...
            assert partition.error_message is None
            metadata = MetadataRequest(version=9, topics=[], allow_auto_topic_creation=False)
            assert _ask(sock, metadata, 9, MetadataResponse).brokers
        grown = _peak_rss_kib(server.proc.pid) - before
        assert grown < 100 << 10, f"peak RSS grew {grown} KiB"  # not the 1 GiB of the body
        # ... and the reason in the server's log.
        for _ in range(100):
            if "decompresses to more than 8388608 bytes" in server.log:
                break
            time.sleep(0.05)
        assert "decompresses to more than 8388608 bytes" in server.log, server.log
    finally:
        server.stop()
