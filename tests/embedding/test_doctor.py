"""`minicoord doctor HOST:PORT -X key=value`: against minicoord, against a minicoord with APIs
taken out of its handler registry (so that ApiVersions no longer advertises them, as an older
or smaller server would not), against a server advertising a listener nobody can reach, and
against an address that does not answer Kafka at all. The doctor runs as a client over real
loopback sockets; its output is read as a person and as a script would.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from minicoord.server.cli import main
from minicoord.server.handlers import HandlerRegistry
from minicoord.testing import EmbeddedServer, running

TOPIC = "orders"
CONSUMER_GROUP_HEARTBEAT, INIT_PRODUCER_ID = 68, 22


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out


def row(out: str, first: str) -> list[str]:
    """The table row whose first column is `first`, split on the column gaps."""
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{out}")


@pytest.fixture
def server(group_id: str) -> Iterator[EmbeddedServer]:
    with running(topics=[(TOPIC, 3)]) as s:
        # A group that exists: offsets committed by a consumer that assigns itself.
        consumer = Consumer(
            {"bootstrap.servers": s.bootstrap, "group.id": group_id, "log_level": 0}
        )
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        consumer.close()
        yield s


def test_doctor_against_minicoord(
    server: EmbeddedServer, group_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = [
        "group.protocol=consumer",
        "enable.idempotence=true",
        "isolation.level=read_committed",
        "transactional.id=tx-1",
        "security.protocol=PLAINTEXT",
        f"group.id={group_id}",
        "compression.codec=zstd",
        "linger.ms=5",
    ]
    code, out = doctor(capsys, server.bootstrap, *(a for s in settings for a in ("-X", s)))
    assert code == 0, out
    assert out.startswith(f"minicoord doctor {server.bootstrap}\ncluster ")
    assert row(out, "0") == ["0", "127.0.0.1", str(server.port), "-", "yes"]  # the broker
    assert row(out, "68") == ["68", "ConsumerGroupHeartbeat", "0-1"]
    assert row(out, "22") == ["22", "InitProducerId", "0-5"]
    assert "finalized features: group.version=1, metadata.version=25, share.version=1" in out
    assert row(out, TOPIC) == [TOPIC, "3", "no"]
    assert row(out, "__consumer_offsets") == ["__consumer_offsets", "50", "yes"]
    assert row(out, group_id) == [group_id, "classic", "Empty", "-"]  # no protocol type
    assert row(out, "consumer group, consumer protocol (KIP-848)")[1] == "ok"
    assert row(out, "transactions")[1] == "ok"
    assert row(out, "transactional.id=tx-1")[1:] == ["ok", "the transaction APIs are advertised"]
    assert row(out, "advertised listeners")[1] == "ok"
    assert row(out, "group.protocol=consumer")[1:] == [
        "ok", "ConsumerGroupHeartbeat v0-1 advertised; group.version 1 finalized"
    ]  # fmt: skip
    assert row(out, "enable.idempotence=true")[1:] == ["ok", "InitProducerId v0-5 advertised"]
    assert row(out, "isolation.level=read_committed")[1] == "ok"
    assert row(out, "security.protocol=PLAINTEXT")[1] == "ok"
    assert row(out, f"group.id={group_id}")[1:] == [
        "ok", f"its coordinator is node 0 at 127.0.0.1:{server.port}"
    ]  # fmt: skip
    assert row(out, "compression.codec=zstd")[1] == "ok"
    assert row(out, "linger.ms=5")[1:] == ["not checked", "no server API decides this setting"]

    # What cannot work here, and why; the exit status says so.
    bad = ["security.protocol=SASL_SSL", "sasl.mechanism=PLAIN"]
    code, out = doctor(capsys, server.bootstrap, *(a for s in bad for a in ("-X", s)))
    assert code == 1
    reason = row(out, "security.protocol=SASL_SSL")[2]
    assert row(out, "security.protocol=SASL_SSL")[1] == "CANNOT WORK"
    assert "does not speak TLS" in reason
    assert "SaslHandshake answered ILLEGAL_SASL_STATE" in reason
    assert row(out, "sasl.mechanism=PLAIN")[1] == "CANNOT WORK"
    assert "this listener does no SASL authentication" in row(out, "sasl.mechanism=PLAIN")[2]

    # With no mechanism named, a client tries its default (GSSAPI): the handshake is asked,
    # and this listener answers it ILLEGAL_SASL_STATE.
    code, out = doctor(capsys, server.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT")
    assert code == 1
    assert row(out, "security.protocol=SASL_PLAINTEXT")[1] == "CANNOT WORK"
    assert "answered ILLEGAL_SASL_STATE" in row(out, "security.protocol=SASL_PLAINTEXT")[2]

    code, out = doctor(capsys, "--json", server.bootstrap, "-X", "group.protocol=consumer")
    report = json.loads(out)
    assert code == 0 and report["bootstrap"] == server.bootstrap
    assert {"key": 68, "name": "ConsumerGroupHeartbeat", "min": 0, "max": 1} in report["apis"]
    assert report["brokers"] == [
        {"node_id": 0, "host": "127.0.0.1", "port": server.port, "rack": None, "reachable": True}
    ]
    assert report["finalized_features"] == {
        "group.version": 1,
        "metadata.version": 25,
        "share.version": 1,
    }
    assert {"name": TOPIC, "partitions": 3, "internal": False, "error": 0} in report["topics"]
    assert report["checks"] == [
        {
            "subject": "group.protocol=consumer",
            "verdict": "ok",
            "reason": "ConsumerGroupHeartbeat v0-1 advertised; group.version 1 finalized",
        }
    ]


def _without(server: EmbeddedServer, *keys: int) -> None:
    """Take APIs out of the running server's registry: ApiVersions stops advertising them
    and their requests are refused, as on a server that never had them."""

    def strip() -> None:
        broker = server.server.broker
        broker.handlers = HandlerRegistry([h for h in broker.handlers if h.spec.key not in keys])

    server.call(strip)


def test_doctor_against_a_server_without_the_apis_a_setting_needs(
    server: EmbeddedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _without(server, CONSUMER_GROUP_HEARTBEAT, INIT_PRODUCER_ID)
    code, out = doctor(
        capsys,
        server.bootstrap,
        "-X", "group.protocol=consumer",
        "-X", "enable.idempotence=true",
        "-X", "group.protocol=classic",
    )  # fmt: skip
    assert code == 1
    assert "ConsumerGroupHeartbeat" not in out.split("what can work here:")[0]
    verdict, reason = row(out, "consumer group, consumer protocol (KIP-848)")[1:]
    assert verdict == "CANNOT WORK"
    assert reason.startswith("ConsumerGroupHeartbeat (key 68) is not advertised")
    assert row(out, "idempotent producer")[1:] == [
        "CANNOT WORK", "not advertised: InitProducerId (key 22)"
    ]  # fmt: skip
    assert row(out, "enable.idempotence=true")[1:] == [
        "CANNOT WORK",
        "InitProducerId (key 22) is not advertised: no producer ids to be idempotent with",
    ]
    # The last -X of a key wins, as in librdkafka: the classic protocol can work.
    assert row(out, "group.protocol=classic")[1] == "ok"
    # Booleans as librdkafka reads them: 1 is on (and cannot work here), maybe is refused.
    code, out = doctor(capsys, server.bootstrap, "-X", "enable.idempotence=1")
    assert code == 1 and row(out, "enable.idempotence=1")[1] == "CANNOT WORK"
    code, out = doctor(capsys, server.bootstrap, "-X", "enable.idempotence=F")
    assert code == 0 and row(out, "enable.idempotence=F")[1:] == [
        "ok", "idempotence off: nothing more needed"
    ]  # fmt: skip
    code, out = doctor(capsys, server.bootstrap, "-X", "enable.idempotence=maybe")
    assert code == 1 and row(out, "enable.idempotence=maybe")[1:] == [
        "CANNOT WORK", "'maybe' is not a boolean: the client refuses it (true or false)"
    ]  # fmt: skip

    # With no mechanism named, a client tries its default (GSSAPI): the handshake is asked,
    # and this listener answers it ILLEGAL_SASL_STATE.
    code, out = doctor(capsys, server.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT")
    assert code == 1
    assert row(out, "security.protocol=SASL_PLAINTEXT")[1] == "CANNOT WORK"
    assert "answered ILLEGAL_SASL_STATE" in row(out, "security.protocol=SASL_PLAINTEXT")[2]

    code, out = doctor(capsys, "--json", server.bootstrap, "-X", "group.protocol=consumer")
    (check,) = json.loads(out)["checks"]
    assert code == 1 and check["verdict"] == "cannot work"
    assert "a group.protocol=consumer consumer never joins" in check["reason"]


def test_doctor_names_an_advertised_listener_nobody_can_reach(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as probe:  # a port with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    configs = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{dead}"}
    with running(configs=configs) as server:
        code, out = doctor(capsys, server.bootstrap)
    assert code == 1
    assert row(out, "0") == ["0", "127.0.0.1", str(dead), "-", "NO"]
    verdict, reason = row(out, "advertised listeners")[1:]
    assert verdict == "CANNOT WORK"
    assert reason.startswith(f"node 0 at 127.0.0.1:{dead} unreachable from here")


def test_doctor_at_an_address_that_does_not_answer_kafka(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        code, out = doctor(capsys, f"127.0.0.1:{port}", "--timeout", "0.5")
    assert code == 3
    assert out.strip() == (
        f"minicoord doctor 127.0.0.1:{port}: connected to 127.0.0.1:{port}, but it did not "
        "answer ApiVersions in the plaintext Kafka protocol (no answer within 0.5 s): "
        "a TLS listener, or not Kafka?"
    )
    code, out = doctor(capsys, "--json", f"127.0.0.1:{port}")  # now closed: refused
    assert code == 3 and json.loads(out)["error"].startswith(f"cannot connect to 127.0.0.1:{port}")


def test_doctor_takes_a_bootstrap_servers_list_and_uses_the_first_that_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
        with running() as s:
            code, out = doctor(capsys, "--json", f"{gone}, {s.bootstrap}")
            assert code == 0, out
            assert json.loads(out)["bootstrap"] == s.bootstrap
        code, out = doctor(capsys, "--json", f"{gone},{gone}")
    assert code == 3 and json.loads(out)["error"].startswith(f"cannot connect to {gone}")


def test_doctor_refuses_a_malformed_setting(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["doctor", "127.0.0.1:9", "-X", "group.protocol"]) == 2
    assert capsys.readouterr().err == "minicoord: -X 'group.protocol': expected KEY=VALUE\n"


@pytest.mark.parametrize("address", ["127.0.0.1:70000", "127.0.0.1:0", "127.0.0.1:abc"])
def test_doctor_refuses_an_address_no_server_can_have(
    capsys: pytest.CaptureFixture[str], address: str
) -> None:
    capsys.readouterr()
    assert main(["doctor", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minicoord: ") and f"'{address}'" in err and err.count("\n") == 1


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "soon"])
def test_doctor_refuses_a_timeout_no_answer_could_meet(
    capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "127.0.0.1:9", "--timeout", timeout])
    assert exited.value.code == 2
    assert "argument --timeout" in capsys.readouterr().err


def test_a_sasl_protocol_without_a_mechanism_is_judged_by_the_clients_default() -> None:
    from minicoord.clients.doctor_checks import Advertised, check_settings

    adv = Advertised({17: (0, 1), 36: (0, 2)}, {})
    refused = {"accepted": False, "enabled": ["PLAIN", "SCRAM-SHA-256"]}
    (finding,) = check_settings(adv, {"security.protocol": "SASL_SSL"}, {"sasl": refused})
    assert finding.verdict == "cannot work"
    assert finding.reason == (
        "SaslHandshake refused GSSAPI, the mechanism clients use when sasl.mechanism is not "
        "set (enabled: PLAIN, SCRAM-SHA-256)"
    )
    # Named, the mechanism is judged on its own row; the protocol's needs are met.
    named = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "GSSAPI"}
    protocol, mechanism = check_settings(adv, named, {"sasl": refused})
    assert protocol.verdict == "ok" and mechanism.verdict == "cannot work"
    accepted = {"accepted": True, "enabled": ["GSSAPI"]}
    (ok,) = check_settings(adv, {"security.protocol": "SASL_SSL"}, {"sasl": accepted})
    assert ok.verdict == "ok"
