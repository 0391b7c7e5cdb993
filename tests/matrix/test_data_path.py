"""The data path through kafkajs, @platformatic/kafka and kcat: keyed messages with headers,
produced by each client's idempotent producer, read back through a consumer group of the same
client, committed; and kcat reading the coordinator's own records from `__consumer_offsets`.

The Node clients run node/produce_consume.mjs, which produces the messages of
`deliverykit.keyed_messages` a chunk at a time, consumes them with a group, commits the offset
after each partition's last record, and reports (JSON lines) every record, each send's base
offsets, and the end and committed offsets as its own client reads them (ListOffsets,
OffsetFetch). kcat produces with `kcat -P -K -H` (one run per header set: -H applies to every
message of a run) and reads back with `kcat -G -J`, whose JSON envelope shows partition,
offset, key, payload (null included) and headers; it commits by itself when it exits.

In every case `deliverykit.check_delivery` requires every message with its key, value and headers,
in produce order per partition, at offsets 0, 1, 2, …; and the group's committed offsets, read
by a confluent-kafka reader that does not join the group, must equal the end offsets.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from deliverykit import Consumed, Message, check_delivery, keyed_messages, offsets_partition
from matrixkit import HEARTBEAT_MS, NODE_DIR, PARTITIONS, SESSION_MS, TOPIC, committed_offsets

pytestmark = pytest.mark.clients

MESSAGES = 600
CHUNK = 50
RUN_TIMEOUT_S = 60
PRODUCE_CONSUME = NODE_DIR / "produce_consume.mjs"


def run(args: list[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """Run a client to completion, bounded by RUN_TIMEOUT_S; fail with its output otherwise."""
    try:
        done = subprocess.run(args, capture_output=True, timeout=RUN_TIMEOUT_S, **kwargs)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what} did not finish in {RUN_TIMEOUT_S}s:\n{exc.stdout!r}\n{exc.stderr!r}")
    assert done.returncode == 0, f"{what} exited {done.returncode}:\n{done.stderr!r}"
    return done


# -- kafkajs and @platformatic/kafka ------------------------------------------------------------


def run_node(
    client: str, bootstrap: str, group: str, messages: list[Message], folder: Path, codec: str
) -> list[dict[str, Any]]:
    """produce_consume.mjs to completion; its events."""
    path = folder / "messages.json"
    path.write_text(json.dumps([m.to_json() for m in messages]))
    options = {
        "messages_file": str(path),
        "chunk": CHUNK,
        "compression": codec,
        "session_ms": SESSION_MS,
        "heartbeat_ms": HEARTBEAT_MS,
        "client_id": f"data-{client}",
        "lifetime_ms": (RUN_TIMEOUT_S - 5) * 1000,
    }
    args = ["node", str(PRODUCE_CONSUME), client, bootstrap, group, TOPIC, json.dumps(options)]
    done = run(args, f"produce_consume.mjs {client}", cwd=NODE_DIR, text=True)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    errors = [e for e in events if e["event"] == "error"]
    assert not errors, f"{errors}\n{done.stderr}"
    assert events and events[-1]["event"] == "closed", done.stderr
    return events


def check_node_run(
    events: list[dict[str, Any]], produced: list[Message], bootstrap: str, group: str
) -> dict[int, int]:
    consumed = [Consumed.from_json(e) for e in events if e["event"] == "message"]
    ends = check_delivery(produced, consumed, PARTITIONS)

    # Each send's answer named, for every partition it wrote to, the offset of its first
    # message there: the smallest offset its messages were read back at.
    where = {Message(r.key or b"", r.value, r.headers): (r.partition, r.offset) for r in consumed}
    sends = [e for e in events if e["event"] == "produced"]
    assert [(s["first"], s["count"]) for s in sends] == [
        (first, min(CHUNK, len(produced) - first)) for first in range(0, len(produced), CHUNK)
    ]
    for send in sends:
        base: dict[int, int] = {}
        for message in produced[send["first"] : send["first"] + send["count"]]:
            p, o = where[message]
            base[p] = min(base.get(p, o), o)
        reported = {o["partition"]: int(o["offset"]) for o in send["offsets"]}
        assert reported == base, f"send of {send['first']}…: answered {reported}, read {base}"

    def ints(offsets: dict[str, str]) -> dict[int, int]:
        return {int(p): int(o) for p, o in offsets.items()}

    (committed,) = [e for e in events if e["event"] == "committed"]
    assert ints(committed["offsets"]) == ends
    # The client's own view: ListOffsets and OffsetFetch after its commit.
    (offsets,) = [e for e in events if e["event"] == "offsets"]
    assert ints(offsets["end"]) == ends
    assert ints(offsets["committed"]) == ends
    # And a reader outside the group (confluent-kafka's OffsetFetch) sees the same.
    assert committed_offsets(bootstrap, group) == ends
    return ends


@pytest.mark.usefixtures("node_clients")
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_round_trip(server: Any, group_id: str, tmp_path: Path, codec: str) -> None:
    produced = keyed_messages(MESSAGES, tag=f"kafkajs-{codec}")
    events = run_node("kafkajs", server.bootstrap, group_id, produced, tmp_path, codec)
    check_node_run(events, produced, server.bootstrap, group_id)


@pytest.mark.usefixtures("node_clients")
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_platformatic_round_trip(server: Any, group_id: str, tmp_path: Path, codec: str) -> None:
    produced = keyed_messages(MESSAGES, tag=f"platformatic-{codec}")
    events = run_node("platformatic", server.bootstrap, group_id, produced, tmp_path, codec)
    check_node_run(events, produced, server.bootstrap, group_id)
    (producer,) = [e for e in events if e["event"] == "producer"]
    # The idempotent producer got its id from InitProducerId.
    assert int(producer["producer_id"]) >= 0, producer


# -- kcat -----------------------------------------------------------------------------------------

KCAT_RUNS = 4
KCAT_PER_RUN = 150


def kcat_messages(run_index: int, count: int) -> list[Message]:
    """Text messages (kcat reads them as `key<TAB>value` lines); an empty line value is sent as
    a null value (-Z), one in 50. The headers are the run's: kcat -H sets them for a whole run."""
    headers = (
        ("run", f"r{run_index}".encode()),
        ("tag", b"first"),
        ("tag", b"second"),
        ("empty", b""),
    )
    return [
        Message(
            f"key-{i % 23}".encode(),
            None if i % 50 == 49 else f"kcat-{run_index}-{i}".encode(),
            headers,
        )
        for i in range(count)
    ]


def kcat_produce(kcat: str, bootstrap: str, messages: list[Message], codec: str) -> str:
    """One `kcat -P` run (idempotent, with -d eos to show the producer id it got, and msg
    the codec each batch went with); its log."""
    headers = messages[0].headers
    assert all(m.headers == headers for m in messages)
    args = [kcat, "-P", "-b", bootstrap, "-t", TOPIC, "-K", "\t", "-Z", "-z", codec]
    args += ["-X", "enable.idempotence=true", "-d", "eos,msg"]
    for k, v in headers:
        args += ["-H", f"{k}={v.decode()}"]
    lines = "".join(f"{m.key.decode()}\t{(m.value or b'').decode()}\n" for m in messages)
    return run(args, "kcat -P", input=lines, text=True).stderr


def kcat_consume(kcat: str, bootstrap: str, group: str) -> list[Consumed]:
    """`kcat -G` from the beginning until the end of every partition (-e), as JSON envelopes;
    it commits what it printed when it exits."""
    args = [kcat, "-b", bootstrap, "-G", group, "-J", "-e", "-o", "beginning"]
    for setting in (f"session.timeout.ms={SESSION_MS}", f"heartbeat.interval.ms={HEARTBEAT_MS}"):
        args += ["-X", setting]
    done = run([*args, TOPIC], "kcat -G", text=True)
    records = []
    for line in done.stdout.splitlines():
        envelope = json.loads(line)
        flat = envelope["headers"] or []
        headers = tuple((flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2))
        key, payload = envelope["key"], envelope["payload"]
        records.append(
            Consumed(
                envelope["partition"],
                envelope["offset"],
                None if key is None else key.encode(),
                None if payload is None else payload.encode(),
                headers,
            )
        )
    return records


def kcat_end_offsets(kcat: str, bootstrap: str) -> dict[int, int]:
    """`kcat -Q` with timestamp -1 for every partition: ListOffsets' latest offsets."""
    args = [kcat, "-Q", "-b", bootstrap]
    for p in range(PARTITIONS):
        args += ["-t", f"{TOPIC}:{p}:-1"]
    out = run(args, "kcat -Q", text=True).stdout
    ends = {}
    for line in out.splitlines():
        if line.strip():
            name, partition, word, offset = line.split()
            assert (name, word) == (TOPIC, "offset"), line
            ends[int(partition.strip("[]"))] = int(offset)
    return ends


def produce_and_consume_with_kcat(
    kcat: str, bootstrap: str, group: str, codec: str, runs: int, per_run: int
) -> dict[int, int]:
    produced: list[Message] = []
    for r in range(runs):
        messages = kcat_messages(r, per_run)
        log = kcat_produce(kcat, bootstrap, messages, codec)
        # librdkafka's eos debug line: the idempotent producer was given an id.
        assert "-> PID{Id:" in log, log[-2000:]
        # Older librdkafka sends gzip, snappy and lz4 only to a broker listing Produce
        # v0, and says so when it falls back (KAFKA-18659; minicoord lists v0 as Kafka 4 does).
        assert "not compressing" not in log, log[-2000:]
        produced += messages
    ends = check_delivery(produced, kcat_consume(kcat, bootstrap, group), PARTITIONS)
    assert kcat_end_offsets(kcat, bootstrap) == ends
    assert committed_offsets(bootstrap, group) == ends
    return ends


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_kcat_round_trip(server: Any, kcat: str, group_id: str, codec: str) -> None:
    produce_and_consume_with_kcat(kcat, server.bootstrap, group_id, codec, KCAT_RUNS, KCAT_PER_RUN)


# -- kcat reading __consumer_offsets --------------------------------------------------------------

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, Kafka's default


def read_offsets_topic(kcat: str, bootstrap: str) -> list[tuple[int, int, bytes, bytes | None]]:
    """Every record of __consumer_offsets as (partition, offset, key, value); kcat prints the
    key and value lengths before the raw bytes, so binary keys and values split exactly."""
    args = [kcat, "-C", "-b", bootstrap, "-t", OFFSETS_TOPIC, "-e", "-o", "beginning"]
    out: bytes = run([*args, "-f", "%p|%o|%K|%S|%k%s\n"], "kcat -C __consumer_offsets").stdout
    records = []
    pos = 0
    for _ in range(len(out)):
        if pos >= len(out):
            break
        fields = []
        for _ in range(4):
            bar = out.index(b"|", pos)
            fields.append(int(out[pos:bar]))
            pos = bar + 1
        partition, offset, key_len, value_len = fields
        assert key_len >= 0, f"a null key at {partition}/{offset}"
        key = out[pos : pos + key_len]
        pos += key_len
        value = None if value_len < 0 else out[pos : pos + value_len]
        pos += max(value_len, 0)
        assert out[pos : pos + 1] == b"\n", f"record {partition}/{offset} does not end there"
        pos += 1
        records.append((partition, offset, key, value))
    return records


class Reader:
    """Kafka's big-endian schema primitives over one key or value."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        text = self.data[self.pos : self.pos + length].decode()
        self.pos += length
        return text


def test_kcat_reads_the_coordinators_records(server: Any, kcat: str, group_id: str) -> None:
    ends = produce_and_consume_with_kcat(kcat, server.bootstrap, group_id, "none", 1, 120)
    records = read_offsets_topic(kcat, server.bootstrap)
    needle = group_id.encode()
    ours = [r for r in records if needle in r[2]]
    assert ours, f"no record of {group_id} among {len(records)}"
    # Every one sits in the group's partition: abs(javaHash(group id)) % 50, as in Kafka.
    assert {p for p, _, _, _ in ours} == {offsets_partition(group_id, OFFSETS_PARTITIONS)}

    commits: dict[int, int] = {}  # partition of TOPIC -> last committed offset, in log order
    groups: list[tuple[str | None, int, str | None, str | None]] = []
    for _, _, key, value in sorted(ours, key=lambda r: r[1]):
        k = Reader(key)
        version = k.take(">h")
        assert k.string() == group_id
        if version in (0, 1):  # OffsetCommitKey: group, topic, partition
            assert k.string() == TOPIC
            partition = k.take(">i")
            assert value is not None, "a tombstone of a commit nobody deleted"
            v = Reader(value)
            assert v.take(">h") in (0, 1, 2, 3)  # OffsetCommitValue: the offset comes first
            commits[partition] = v.take(">q")
        else:  # GroupMetadataKey v2: group
            assert version == 2, key
            assert value is not None, "a tombstone of a group nobody deleted"
            v = Reader(value)
            assert v.take(">h") in (0, 1, 2, 3)
            protocol_type = v.string()
            generation = v.take(">i")
            groups.append((protocol_type, generation, v.string(), v.string()))
        assert k.pos == len(key), f"trailing bytes in key {key!r}"

    # The last commit of each partition is the offset the group has committed: its end.
    assert commits == ends
    # The group as kcat formed it (range, an rdkafka leader), then Empty once kcat left.
    assert groups, "no GroupMetadata record"
    formed = [g for g in groups if g[2] is not None]
    assert formed and all(g[0] == "consumer" and g[2] == "range" for g in formed), groups
    assert all((g[3] or "").startswith("rdkafka-") for g in formed), groups
    last = groups[-1]
    assert last[0] == "consumer" and last[2] is None and last[3] is None, groups
    assert last[1] > formed[-1][1], groups
