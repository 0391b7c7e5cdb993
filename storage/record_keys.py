"""The cleaner's reader of records: each record's key, offset, timestamp and tombstone flag.

Compaction reads every record of every dirty segment twice (once to map keys to their last
offsets, once to decide what to keep) and asks of each only these four things: an
uncompressed batch (all the coordinator writes) is walked here directly, a fraction of the cost
of kafka-python's record objects; a compressed one is read through kafka-python. Tests hold the
two to the same results.
"""

from __future__ import annotations

from minicoord.storage.batch import (
    COMPRESSION_MASK,
    HEADER,
    HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND,
    CorruptBatch,
    opt_bytes,
    parse_batch,
    read_zigzag,
)

# The value of every one-byte zig-zag varint, by its byte.
_ZIGZAG_BYTE = [(b >> 1) ^ -(b & 1) for b in range(0x80)]

# What the cleaner asks of every record: its key, offset, timestamp and whether its value is
# null (a tombstone).
KeyedRecord = tuple[bytes | None, int, int, bool]


def record_keys(data: bytes | bytearray | memoryview) -> list[KeyedRecord]:
    """(key, offset, timestamp, tombstone) of each record of one whole batch (not verified
    here: see verify_batch), as kafka-python reads them.

    An uncompressed batch (all the coordinator writes) is walked directly, reading only the
    fields asked for: a fraction of the cost of a record object each. A compressed one is
    read through kafka-python. Records that do not parse raise CorruptBatch.
    """
    (base, _length, _epoch, _magic, _crc, attributes, _last, first_ts, max_ts, *_, count) = (
        HEADER.unpack_from(data, 0)
    )
    if attributes & COMPRESSION_MASK:
        try:
            return [
                (opt_bytes(r.key), r.offset, r.timestamp, r.value is None)
                for r in parse_batch(data)
            ]
        except Exception as exc:  # a CRC-valid batch whose records do not parse
            raise CorruptBatch(f"undecodable records: {exc!r}") from exc
    buf = bytes(data) if not isinstance(data, bytes) else data
    out: list[KeyedRecord] = []
    pos = HEADER_SIZE
    end = len(buf)
    try:
        # One-byte varints (nearly every length and delta) are decoded inline, through the
        # table; longer ones by read_zigzag. A record's own length is inline up to two
        # bytes: an offset commit's is 64-8191 bytes, two.
        small = _ZIGZAG_BYTE
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                size = small[b]
                pos += 1
            elif buf[pos + 1] < 0x80:
                z = (b & 0x7F) | (buf[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = read_zigzag(buf, pos)
            record_end = pos + size
            if buf[pos] & 0x80:
                # Attributes are one byte, unused and 0 (kafka-python reads a varint here).
                raise CorruptBatch("record attributes out of range")
            at = pos + 1
            b = buf[at]
            ts_delta, at = (small[b], at + 1) if b < 0x80 else read_zigzag(buf, at)
            b = buf[at]
            offset_delta, at = (small[b], at + 1) if b < 0x80 else read_zigzag(buf, at)
            b = buf[at]
            key_len, at = (small[b], at + 1) if b < 0x80 else read_zigzag(buf, at)
            key = None
            if key_len >= 0:
                key = buf[at : at + key_len]
                at += key_len
            b = buf[at]
            value_len, at = (small[b], at + 1) if b < 0x80 else read_zigzag(buf, at)
            if value_len >= 0:
                at += value_len
            if key_len < -1 or value_len < -1:
                raise CorruptBatch("a negative field length other than -1 (null)")
            # Headers are checked, not kept: a record must parse whole to be read at all.
            b = buf[at]
            headers, at = (small[b], at + 1) if b < 0x80 else read_zigzag(buf, at)
            if headers < 0:
                raise CorruptBatch("a negative header count")
            for _ in range(headers):
                name_len, at = read_zigzag(buf, at)
                if name_len < 0 or at + name_len > record_end:
                    raise CorruptBatch("a header name out of its record")
                str(buf[at : at + name_len], "utf-8")
                header_len, at = read_zigzag(buf, at + name_len)
                if header_len >= 0:
                    at += header_len
            if at != record_end or record_end > end:
                raise CorruptBatch("a record's fields do not fill its length")
            out.append((key, base + offset_delta, first_ts + ts_delta, value_len < 0))
            pos = record_end
    except IndexError:
        raise CorruptBatch("a record runs past its batch") from None
    except UnicodeDecodeError:
        raise CorruptBatch("a header name is not UTF-8") from None
    if pos != end:
        raise CorruptBatch("bytes left over after the batch's records")
    if attributes & TIMESTAMP_TYPE_LOG_APPEND:
        # Every record of a LogAppendTime batch has the batch's time, as kafka-python reads it.
        return [(k, o, max_ts, t) for k, o, _ts, t in out]
    return out
