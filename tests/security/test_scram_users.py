"""SCRAM users made with AlterUserScramCredentials are kept in the cluster metadata log: they
survive a restart on the same data directory and authenticate there; the log holds the salt
and keys, never the password."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from minicoord.server.security.certs import CertFiles
from minicoord.testing.embedded import running

pytestmark = pytest.mark.clients

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
PASSWORD = "carol-secret-Ww4"


def _admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _can_read_metadata(conf: dict[str, object]) -> bool:
    from confluent_kafka import KafkaException, Producer

    errors: list[object] = []
    producer = Producer(conf | {"error_cb": errors.append})
    try:
        producer.list_topics(timeout=4)
    except KafkaException:
        return False
    return not errors


def test_scram_users_from_the_admin_api_survive_a_restart(tmp_path: Path, certs: CertFiles) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    data_dir = tmp_path / "data"
    with running(data_dir=data_dir, listeners=LISTENERS, tls=certs) as server:
        admin = _admin(server.address_of("PLAINTEXT"))
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "carol",
                    ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                    PASSWORD.encode(),
                ),
                UserScramCredentialUpsertion(
                    "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-pw"
                ),
            ]
        )
        for future in futures.values():
            future.result(10)
        futures = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]
        )
        for future in futures.values():
            future.result(10)
        # Too few iterations: refused as Kafka refuses it.
        bad = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"x"
                )
            ]
        )
        with pytest.raises(Exception, match="iterations"):
            bad["erin"].result(10)
    stored = b"".join(p.read_bytes() for p in data_dir.rglob("*") if p.is_file())
    assert PASSWORD.encode() not in stored and b"carol" in stored

    with running(data_dir=data_dir, listeners=LISTENERS, tls=certs) as server:
        # Kept in a name: a collected AdminClient never completes its futures.
        reader = _admin(server.address_of("PLAINTEXT"))
        found = reader.describe_user_scram_credentials().result(10)
        assert set(found) == {"carol"}
        [info] = found["carol"].scram_credential_infos
        assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
        conf = server.client("SASL_SSL").confluent() | {
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": PASSWORD,
        }
        assert _can_read_metadata(conf)
        assert not _can_read_metadata(conf | {"sasl.password": "wrong"})
        assert not _can_read_metadata(
            conf | {"sasl.username": "dave", "sasl.mechanism": "SCRAM-SHA-256"}
        )


def test_a_credential_salted_by_the_admin_client_with_a_short_salt_logs_in(
    certs: CertFiles,
) -> None:
    # Kafka keeps the salt an admin client chose, of any length (sarama's callers choose
    # theirs), and its SCRAM exchange sends it back as it is: a 5-byte one logs in too.
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    with running(listeners=LISTENERS, tls=certs) as server:
        admin = _admin(server.address_of("PLAINTEXT"))
        for user, mechanism, salt in [
            ("frank", ScramMechanism.SCRAM_SHA_256, b"short"),
            ("grace", ScramMechanism.SCRAM_SHA_512, b"eleven-byte"),
        ]:
            info = ScramCredentialInfo(mechanism, 4096)
            upsertion = UserScramCredentialUpsertion(user, info, f"{user}-pw".encode(), salt)
            for future in admin.alter_user_scram_credentials([upsertion]).values():
                future.result(10)
            conf = server.client("SASL_SSL").confluent() | {
                "sasl.mechanism": "SCRAM-SHA-256"
                if mechanism == ScramMechanism.SCRAM_SHA_256
                else "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": f"{user}-pw",
            }
            assert _can_read_metadata(conf), user
            assert not _can_read_metadata(conf | {"sasl.password": "wrong"}), user


def test_scram_credentials_need_the_cluster_with_acls_on() -> None:
    # Kafka's KafkaApis: DescribeUserScramCredentials needs Describe on the cluster and
    # AlterUserScramCredentials Alter; without them nobody may read or set another's password.
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    upsert = UserScramCredentialUpsertion(
        "admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"taken-over"
    )
    with running(users={"admin": "admin-pw"}, super_users=["User:admin"]) as server:
        admin = _admin(server.bootstrap)  # ANONYMOUS, no ACL
        with pytest.raises(KafkaException) as refused:
            admin.alter_user_scram_credentials([upsert])["admin"].result(10)
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # Read raw: librdkafka frees a stack copy of a refused describe's message (a crash
        # against Kafka as well).
        assert _describe_raw(server.port, ["admin"]) == (31, [("", 31, [])])
        assert _describe_raw(server.port, None) == (31, [])
        # Kafka's words for it: the error's own message.
        assert _describe_raw(server.port, None, message=True) == "Cluster authorization failed."
    allowed = ["allow User:ANONYMOUS Alter cluster", "allow User:ANONYMOUS Describe cluster"]
    with running(users={"admin": "admin-pw"}, acls=allowed) as server:
        admin = _admin(server.bootstrap)
        admin.alter_user_scram_credentials([upsert])["admin"].result(10)
        # SHA-256 changed (8192 iterations), SHA-512 as `users` made it.
        infos = [(1, 8192), (2, 4096)]
        assert _describe_raw(server.port, ["admin"]) == (0, [("admin", 0, infos)])


def _describe_raw(port: int, users: list[str] | None, message: bool = False) -> Any:
    from kafka.protocol.admin import DescribeUserScramCredentialsRequest
    from minicoord.clients.connection import ProtocolClient

    named = (
        None
        if users is None
        else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]
    )

    async def ask() -> object:
        client = await ProtocolClient.connect("127.0.0.1", port, "scram-test")
        try:
            request = DescribeUserScramCredentialsRequest(version=0, users=named)
            return await asyncio.wait_for(client.request(request, 0), 10)
        finally:
            await client.close()

    answer: Any = asyncio.run(ask())
    if message:
        return answer.error_message
    results = [
        (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in answer.results
    ]
    return answer.error_code, results
