"""`minicoord ctl` against a running server: every action in words and with --json, the
groups and describe tables with real members, commits and lag, and the exit status when the
group or member named does not exist.

The server runs embedded with its control API on a real loopback port; the CLI runs in this
process (`main`, output captured) and, once, as a child process. Members are confluent-kafka
consumers of both protocols. Every wait is bounded.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from minicoord.server.cli import main
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.testing import EmbeddedServer, running

TOPIC = "ctl"
PARTITIONS = 4
PRODUCED = {0: 5, 1: 3}  # messages per partition


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    configs = {"group.consumer.heartbeat.interval.ms": 100, "group.min.session.timeout.ms": 1000}
    with running(configs=configs, topics=[(TOPIC, PARTITIONS)], control_port=0) as s:
        yield s


class Ctl:
    def __init__(self, server: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> None:
        self.address = f"127.0.0.1:{server.server.control_port}"
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(["ctl", "--control", self.address, *args])
        out, err = self.capsys.readouterr()
        return code, out.strip(), err.strip()

    def json(self, *args: str) -> tuple[int, dict[str, Any]]:
        code, out, _ = self("--json", *args)
        return code, json.loads(out)


@pytest.fixture
def ctl(server: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> Ctl:
    return Ctl(server, capsys)


def member(server: EmbeddedServer, group_id: str, protocol: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group_id,
            "group.protocol": protocol,
            "client.id": f"{protocol}-member",
            "enable.auto.commit": False,
            "log_level": 0,
            **({"session.timeout.ms": 6000} if protocol == "classic" else {}),
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def poll_until(check: Callable[[], bool], members: list[Consumer], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.02)):
        if check() or time.monotonic() > deadline:
            break
        for c in members:
            c.poll(0.01)
    assert check(), "condition not reached in time"


@pytest.fixture
def groups(server: EmbeddedServer, group_id: str) -> Iterator[tuple[str, str, list[Consumer]]]:
    """A classic and a consumer-protocol group, one member each, both with commits, and a
    topic holding messages (so lag means something)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "log_level": 0})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, f"m{i}".encode(), partition=partition)
    assert producer.flush(20) == 0
    classic, consumer = f"{group_id}-classic", f"{group_id}-consumer"
    members = [member(server, classic, "classic"), member(server, consumer, "consumer")]
    poll_until(lambda: all(len(m.assignment()) == PARTITIONS for m in members), members)
    members[0].commit(
        offsets=[TopicPartition(TOPIC, 0, 2), TopicPartition(TOPIC, 1, 3)], asynchronous=False
    )
    members[1].commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
    yield classic, consumer, members
    for m in members:
        m.close()


def test_groups_and_describe_show_members_assignments_offsets_and_lag(
    ctl: Ctl, groups: tuple[str, str, list[Consumer]]
) -> None:
    classic, consumer, _ = groups
    code, out, _ = ctl("groups")
    assert code == 0
    lines = out.splitlines()
    assert re.split(r"\s+", lines[0]) == [
        "GROUP", "TYPE", "STATE", "MEMBERS", "GENERATION", "ASSIGNOR", "LAG"
    ]  # fmt: skip
    rows = {r[0]: r for r in (re.split(r"\s+", line) for line in lines[1:])}
    assert rows[classic][1:4] == ["classic", "Stable", "1"]
    assert rows[classic][6] == "3"  # partition 0: 5 - 2; partition 1: 3 - 3
    assert rows[consumer][1:4] == ["consumer", "Stable", "1"]
    assert rows[consumer][5] == "uniform" and rows[consumer][6] == "0"

    code, listing = ctl.json("groups")
    assert code == 0 and listing["ok"]
    by_id = {g["group"]: g for g in listing["groups"]}
    assert by_id[classic]["lag"] == 3 and by_id[classic]["partitions_committed"] == 2
    assert by_id[consumer]["type"] == "consumer" and by_id[consumer]["members"] == 1

    code, out, _ = ctl("describe", classic)
    assert code == 0
    head, *rest = out.splitlines()
    assert re.fullmatch(
        rf"group {classic} \(classic, Stable, generation \d+, assignor range, "
        r"offsets partition \d+\): 1 member, lag 3",
        head,
    ), head
    text = "\n".join(rest)
    assert re.search(r"classic-member-\S+\s+classic-member\s+/127\.0\.0\.1\s+-\s+ctl:0,1,2,3", text)
    offsets = [re.split(r"\s+", line) for line in text.splitlines() if line.startswith(f"{TOPIC} ")]
    assert [row[:5] for row in offsets] == [
        [TOPIC, "0", "2", "5", "3"],
        [TOPIC, "1", "3", "3", "0"],
        [TOPIC, "2", "-", "0", "-"],
        [TOPIC, "3", "-", "0", "-"],
    ]
    assert all(row[5].startswith("classic-member-") for row in offsets)

    code, described = ctl.json("describe", consumer)
    assert code == 0 and described["type"] == "consumer" and described["state"] == "Stable"
    (m,) = described["members"]
    assert m["protocol"] == "consumer" and m["client_id"] == "consumer-member"
    assert m["assignment"] == {TOPIC: [0, 1, 2, 3]} == m["target"]
    assert m["epoch"] == described["generation"] == described["assignment_epoch"]
    first = {k: described["offsets"][0][k] for k in ("topic", "partition", "committed", "log_end")}
    assert first == {"topic": TOPIC, "partition": 0, "committed": 5, "log_end": 5}
    assert described["offsets"][0]["lag"] == 0
    assert described["offsets"][0]["member"] == m["member_id"]

    code, out, err = ctl("describe", "no-such-group")
    assert (code, out, err) == (1, "", "minicoord: group no-such-group does not exist")
    code, body = ctl.json("describe", "no-such-group")
    missing = "group no-such-group does not exist"
    assert code == 1 and body == {
        "ok": False, "message": missing, "error": missing, "not_found": True
    }  # fmt: skip


def test_a_commit_beyond_the_log_end_shows_negative_lag(server: EmbeddedServer, ctl: Ctl) -> None:
    # kafka-consumer-groups --describe prints log end minus committed, unclamped
    # (ConsumerGroupCommand.getLag): a group that committed past the end reads negative.
    producer = Producer({"bootstrap.servers": server.bootstrap, "log_level": 0})
    for i in range(3):
        producer.produce(TOPIC, f"m{i}".encode(), partition=1)
    assert producer.flush(20) == 0
    committer = Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": "ahead", "log_level": 0}
    )
    try:
        committer.commit(offsets=[TopicPartition(TOPIC, 1, 1000)], asynchronous=False)
    finally:
        committer.close()
    code, described = ctl.json("describe", "ahead")
    assert code == 0
    (row,) = described["offsets"]
    assert (row["committed"], row["log_end"], row["lag"]) == (1000, 3, -997)
    code, listing = ctl.json("groups")
    assert {g["group"]: g["lag"] for g in listing["groups"]}["ahead"] == -997


def test_every_action_in_words_and_json(
    server: EmbeddedServer,
    ctl: Ctl,
    groups: tuple[str, str, list[Consumer]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="minicoord")
    classic, consumer, members = groups

    def group_state(gid: str) -> tuple[str, int, list[str]]:
        def read() -> tuple[str, int, list[str]]:
            g = server.server.broker.coordinator.groups.groups[gid]
            gen = g.epoch if hasattr(g, "epoch") else g.generation_id
            return g.state.value, gen, list(g.members)

        return server.call(read)

    faults = server.server.broker.faults

    # rebalance: a consumer group's epoch moves at once; a classic one when members rejoin.
    _, epoch, _ = group_state(consumer)
    assert ctl("rebalance", consumer) == (
        0, f"group {consumer}: rebalance forced (epoch {epoch} → {epoch + 1})", ""
    )  # fmt: skip
    assert group_state(consumer)[1] == epoch + 1
    _, generation, _ = group_state(classic)
    code, body = ctl.json("rebalance", classic)
    assert code == 0 and body["result"] is True
    assert (
        body["message"] == f"group {classic}: rebalance forced "
        f"(generation {generation} → {generation + 1} once the members rejoin)"
    )
    assert body["before"]["state"] == "Stable" and body["after"]["state"] == "PreparingRebalance"
    code, _, err = ctl("rebalance", classic)  # already under way
    assert (
        code == 1
        and err
        == f"minicoord: group {classic} is PreparingRebalance: a rebalance is already under way"
    )
    poll_until(lambda: group_state(classic)[:2] == ("Stable", generation + 1), members)
    assert ctl("rebalance", "no-such-group") == (
        1,
        "",
        "minicoord: group no-such-group does not exist",
    )
    missing = "group no-such-group does not exist"
    assert ctl.json("rebalance", "no-such-group") == (
        1, {"ok": False, "message": missing, "error": missing, "not_found": True}
    )  # fmt: skip

    # expire: a member that does not exist names those that do; one that does is removed.
    (member_id,) = group_state(consumer)[2]
    code, _, err = ctl("expire", consumer, "ghost")
    assert (
        code == 1
        and err == f"minicoord: group {consumer} has no member ghost (members: {member_id})"
    )
    code, body = ctl.json("expire", "no-such-group", "ghost")
    assert code == 1 and body["not_found"] is True
    _, epoch, _ = group_state(consumer)
    code, out, _ = ctl("expire", consumer, member_id)
    assert code == 0 and out == (
        f"group {consumer}: member {member_id} expired (1 → 0 members, Stable → Empty, "
        f"epoch {epoch} → {epoch + 1})"
    )
    (classic_member,) = group_state(classic)[2]
    code, body = ctl.json("expire", classic, classic_member)
    assert (
        code == 0
        and body["after"]["members"] == 0
        and body["message"].startswith(
            f"group {classic}: member {classic_member} expired (1 → 0 members"
        )
    )

    # fail (scoped to a group and a client the members are not, so that they use nothing up)
    assert ctl("fail", "Heartbeat", "NOT_COORDINATOR", "--count", "2", "--group", "other") == (
        0, "the next 2 Heartbeat requests (group other) fail with NOT_COORDINATOR", ""
    )  # fmt: skip
    code, body = ctl.json("fail", "OffsetCommit", "27", "--client", "c1")
    assert code == 0 and body == {
        "ok": True, "result": None,
        "message": "the next OffsetCommit request (client c1) fails with REBALANCE_IN_PROGRESS",
    }  # fmt: skip
    assert server.call(lambda: [(r.api_key, r.remaining) for r in faults.fail_rules]) == [
        (12, 2), (8, 1)
    ]  # fmt: skip
    code, _, err = ctl("fail", "NoSuchApi", "NONE")
    assert code == 2 and err.startswith("minicoord: unknown API 'NoSuchApi'")
    assert "ApiVersions, ConsumerGroupDescribe" in err  # the names as Kafka spells them
    code, body = ctl.json("fail", "Heartbeat", "NO_SUCH_ERROR")
    unknown = "unknown error code 'NO_SUCH_ERROR'"
    assert code == 2 and body == {"ok": False, "message": unknown, "error": unknown}
    # Nonsense is refused as a bad request, not done: NONE as the error, APIs whose answers
    # have no single place for one, a duration not in the future.
    code, _, err = ctl("fail", "Heartbeat", "NONE")
    assert code == 2 and err == "minicoord: NONE is not an error: name the one to fail with"
    code, _, err = ctl("fail", "ApiVersions", "NOT_COORDINATOR")
    assert code == 2 and "failed ApiVersions answer as an unsupported version" in err
    code, _, err = ctl("fail", "CreateTopics", "NOT_COORDINATOR")
    assert code == 2 and "carries errors per topic or resource" in err
    assert ctl("latency", "Heartbeat", "10", "--duration-ms", "-5")[0] == 2
    assert ctl("moved", "-100")[0] == 2
    assert ctl("loading", "0")[0] == 2

    # cut
    assert ctl("cut", "OffsetCommit") == (
        0, "the next OffsetCommit request loses its connection after taking effect", ""
    )  # fmt: skip
    code, body = ctl.json("cut", "Produce", "--count", "3", "--before")
    assert code == 0 and body["message"] == (
        "the next 3 Produce requests lose their connection before taking effect"
    )
    cuts = server.call(
        lambda: [(r.api_key, r.remaining, r.after_handling) for r in faults.cut_rules]
    )
    assert cuts == [(8, 1, True), (0, 3, False)]

    # latency
    assert ctl("latency", "Metadata", "5", "--duration-ms", "60000") == (
        0, "Metadata answers delayed by 5 ms for 60000 ms", ""
    )  # fmt: skip
    code, body = ctl.json("latency", "fetch", "1")
    assert code == 0 and body["message"] == "Fetch answers delayed by 1 ms until cleared"
    assert server.call(lambda: [(r.api_key, r.delay_ms) for r in faults.latency_rules]) == [
        (3, 5), (1, 1)
    ]  # fmt: skip

    # moved / loading
    partition = server.server.broker.coordinator.partition_for(classic)
    code, out, _ = ctl("moved", "60000", "--group", classic)
    assert code == 0
    assert (
        out
        == f"group {classic} (offsets partition {partition}) answers NOT_COORDINATOR for 60000 ms"
    )
    code, body = ctl.json("loading", "60000")
    assert code == 0 and len(body["result"]) == 50
    assert body["message"] == (
        "every group (50 offsets partitions) answers COORDINATOR_LOAD_IN_PROGRESS for 60000 ms"
    )

    # clear: says what it dropped; then that there was nothing.
    assert ctl("clear") == (
        0, "cleared 2 fail, 2 latency and 2 cut rules; 50 partitions restored", ""
    )  # fmt: skip
    assert not server.call(
        lambda: bool(faults) or bool(server.server.broker.coordinator.partition_status)
    )
    code, body = ctl.json("clear")
    assert code == 0 and body["message"] == "nothing to clear"
    nothing = {"fail": 0, "latency": 0, "cut": 0, "partitions": 0}
    assert body["cleared"] == body["result"] == nothing  # `result`: what clear() returns

    # log-level: the request log follows, on the running server.
    try:
        assert ctl("log-level", "debug", "--logger", "minicoord.requests") == (
            0, "log level of minicoord.requests: INFO → DEBUG (request log on)", ""
        )  # fmt: skip
        assert server.call(lambda: server.server.broker.request_log) is not None
        code, body = ctl.json("log-level", "INFO", "--logger", "minicoord.requests")
        assert code == 0 and body["result"] == ["DEBUG", "INFO"] and body["request_log"] is False
        assert server.call(lambda: server.server.broker.request_log) is None
    finally:
        logging.getLogger("minicoord.requests").setLevel(logging.NOTSET)

    # Every action is in the server's log.
    logged = [r.getMessage() for r in caplog.records if r.name == "minicoord.faults"]
    for words in (
        f"force rebalance of {consumer}: done",
        f"force rebalance of {classic}: it is PreparingRebalance",
        "force rebalance of no-such-group: no such group",
        f"expire member ghost of {consumer}: no such member",
        f"expire member {member_id} of {consumer}: done",
        "the next 2 Heartbeat requests fail with NOT_COORDINATOR (group other)",
        "the next 1 OffsetCommit requests lose their connection after taking effect",
        "Metadata answers delayed by 5 ms for 60000 ms",
        f"1 offsets partitions moved for 60000 ms (group {classic})",
        "50 offsets partitions loading for 60000 ms",
        "cleared 2 fail, 2 latency and 2 cut rules; 50 partitions restored",
        "log level of minicoord.requests: INFO -> DEBUG",
    ):
        assert any(line == f"control: {words}" for line in logged), (words, logged)


def test_a_child_process_ctl_and_an_unreachable_control_api(server: EmbeddedServer) -> None:
    address = f"127.0.0.1:{server.server.control_port}"

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "minicoord.server.cli", "ctl", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30)

    done = ctl("--control", address, "--json", "groups")
    assert done.returncode == 0 and json.loads(done.stdout) == {
        "ok": True, "message": "0 groups", "groups": [], "loading": 0, "failed": 0
    }  # fmt: skip
    done = ctl("--control", address, "groups")
    assert (done.returncode, done.stdout) == (0, "no groups\n")
    server.stop()
    done = ctl("--control", address, "groups")
    assert done.returncode == 3
    assert done.stderr.startswith(f"minicoord: cannot reach the control API at {address}")


def test_an_address_that_is_not_the_control_api(capsys: pytest.CaptureFixture[str]) -> None:
    # The metrics port answers HTTP, but not as the control API: not "group not found" (1).
    with running(metrics_port=0) as s:
        metrics = f"127.0.0.1:{s.server.metrics_port}"
        for action in ("groups", "clear"):
            capsys.readouterr()
            assert main(["ctl", "--control", metrics, action]) == 3
            err = capsys.readouterr().err
            assert err.startswith(f"minicoord: {metrics} is not minicoord's control API"), err
    for bad in ("nonsense", "127.0.0.1:99999"):
        capsys.readouterr()
        assert main(["ctl", "--control", bad, "groups"]) == 2
        assert capsys.readouterr().err.startswith("minicoord: --control: ")


def test_a_group_of_a_loading_partition_is_not_said_not_to_exist(
    server: EmbeddedServer, ctl: Ctl
) -> None:
    # While an offsets partition replays at start its groups are not in memory yet: Kafka
    # answers a describe COORDINATOR_LOAD_IN_PROGRESS, and so does the control API (409).
    coordinator = server.server.broker.coordinator
    partition = server.call(lambda: coordinator.partition_for("late"))
    server.call(lambda: coordinator.begin_loading(partition))
    try:
        code, _, err = ctl("describe", "late")
        assert code == 1
        assert err == (
            f"minicoord: group late: its offsets partition {partition} is still loading; "
            "ask again shortly"
        )
        code, body = ctl.json("groups")
        assert (code, body["loading"]) == (0, 1)
        assert body["message"] == "0 groups (1 offsets partitions still loading)"
        code, out, _ = ctl("groups")
        assert out.endswith("(1 offsets partitions still loading: their groups are not listed yet)")
        # One whose log could not be loaded is not served: COORDINATOR_NOT_AVAILABLE in Kafka.
        server.call(lambda: coordinator.set_partition_status(partition, PartitionStatus.FAILED))
        code, _, err = ctl("describe", "late")
        assert code == 1 and f"its offsets partition {partition} is not served" in err
        code, body = ctl.json("groups")
        assert (body["loading"], body["failed"]) == (0, 1)
    finally:
        server.call(lambda: coordinator.set_partition_status(partition, PartitionStatus.ACTIVE))
    code, _, err = ctl("describe", "late")
    assert (code, err) == (1, "minicoord: group late does not exist")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/moved?duration_ms=100&group=", "parameter 'group' is empty"),
        ("/loading?duration_ms=100&group=", "parameter 'group' is empty"),
        ("/fail?api=Heartbeat&error=NOT_COORDINATOR&client=", "parameter 'client' is empty"),
        ("/cut?api=Heartbeat&before=maybe", "parameter 'before' is 'maybe'; true or false"),
        ("/moved?group=g", "missing parameter 'duration_ms'"),
        # A misspelt parameter is not left for a default to take its place.
        ("/moved?ms=100", "unknown parameter 'ms' (takes: duration_ms, group)"),
        ("/fail?api=Heartbeat&error=NOT_COORDINATOR&count=1&bogus=1", "unknown parameter 'bogus'"),
        ("/fail?api=Heartbeat&error=NOT_COORDINATOR&count=x", "count must be an integer, got 'x'"),
        ("/latency?api=Heartbeat&ms=abc", "ms must be an integer, got 'abc'"),
        ("/log-level?level=DEBUG&logger=", "parameter 'logger' is empty"),
    ],
)
def test_the_http_api_refuses_parameters_it_would_misread(
    server: EmbeddedServer, path: str, why: str
) -> None:
    # An empty group= read as "every group", or before=maybe as "after", would act on more
    # than asked: 400, and nothing changes.
    url = f"http://127.0.0.1:{server.server.control_port}{path}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["message"].startswith(why)
    faults = server.call(lambda: server.server.broker.faults)
    assert faults is None or not (faults.fail_rules or faults.cut_rules)
    assert server.call(lambda: dict(server.server.broker.coordinator.partition_status)) == {}
