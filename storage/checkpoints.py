"""Kafka's small per-directory files: offset checkpoints and partition.metadata.

`log-start-offset-checkpoint` is Kafka's OffsetCheckpointFile: a version line (0), a count
line, then `TOPIC PARTITION OFFSET` per line. It holds the log start offsets that DeleteRecords
and retention moved past a segment's base offset, which a restart must not forget.
`partition.metadata` names the topic id a partition directory belongs to, so a directory left
from an earlier topic of the same name is recognised. Both are replaced atomically (write a
temporary file, fsync, rename, fsync the directory).
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Annotations only: a server that keeps its logs in memory does without pathlib, and
    # the uuid module loads with the first topic id (topics.new_topic_id).
    import uuid
    from pathlib import Path

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"
# The data directory's identity, as Kafka keeps it in each log directory (MetaProperties).
META_PROPERTIES = "meta.properties"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    write_atomically(path, "\n".join(lines) + "\n")


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """The checkpoint's offsets; an absent file is empty. A malformed one raises ValueError."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"{path}: not a version 0 offset checkpoint")
    count = int(lines[1])
    entries = lines[2 : 2 + count]
    if len(entries) != count:
        raise ValueError(f"{path}: {count} entries announced, {len(entries)} found")
    out: dict[tuple[str, int], int] = {}
    for line in entries:
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    return out


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomically(
        directory / PARTITION_METADATA, f"version: 0\ntopic_id: {_kafka_id(topic_id)}\n"
    )


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    try:
        text = (directory / PARTITION_METADATA).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            return _parse_kafka_id(value.strip())
    return None


def _kafka_id(topic_id: uuid.UUID) -> str:
    # Kafka prints a Uuid as URL-safe base64 of its 16 bytes, without padding.
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _parse_kafka_id(text: str) -> uuid.UUID | None:
    import uuid  # not at start: see topics.new_topic_id

    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except ValueError:
        return None


def read_meta_properties(data_dir: Path) -> dict[str, str]:
    """The `key=value` lines of the directory's meta.properties; empty if it has none."""
    try:
        text = (data_dir / META_PROPERTIES).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


def write_meta_properties(data_dir: Path, cluster_id: str, node_id: int) -> None:
    write_atomically(
        data_dir / META_PROPERTIES, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
    )
