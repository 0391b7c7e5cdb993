"""The sans-IO security pieces: JAAS strings, SCRAM credentials and their metadata records,
the SASL state machine."""

from __future__ import annotations

import pytest
from minicoord.protocol import metadata_records as mr
from minicoord.server.config import ConfigError
from minicoord.server.security import jaas
from minicoord.server.security.sasl import Authenticator, Refused, SaslSettings, State, UserStore
from minicoord.server.security.scram import (
    MECHANISMS,
    ScramExchange,
    ScramFailed,
    from_salted_password,
    make_credential,
)
from minicoord.server.security.users import alter, apply_record, describe


def test_jaas_strings_as_kafka_writes_them() -> None:
    [module] = jaas.parse(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="alice secret; with = signs";'
    )
    assert module.name == jaas.PLAIN_MODULE and module.flag == "required"
    assert module.users == {"admin": "admin-secret", "alice": "alice secret; with = signs"}
    two = jaas.parse(f'{jaas.SCRAM_MODULE} required user_a="1"; {jaas.PLAIN_MODULE} optional;')
    assert [m.name for m in two] == [jaas.SCRAM_MODULE, jaas.PLAIN_MODULE]
    for bad in ("", "x", "x required a=", 'x required a="b"'):
        with pytest.raises(ConfigError):
            jaas.parse(bad)


def test_a_salted_password_gives_the_credential_a_password_does() -> None:
    import hashlib

    made = make_credential("SCRAM-SHA-512", "pw", 4096)
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", made.salt, 4096)
    assert from_salted_password("SCRAM-SHA-512", made.salt, salted, 4096) == made
    assert "stored" not in repr(made) and "salt" not in repr(made)


def test_scram_records_round_trip_and_replay() -> None:
    store = UserStore()
    upsert = type("U", (), {"name": "u", "mechanism": 2, "iterations": 4096, "salt": b"s" * 16,
                            "salted_password": b"p" * 64})()  # fmt: skip
    outcomes, records = alter(store, [], [upsert])
    assert [(o.user, o.error) for o in outcomes] == [("u", 0)]
    replayed = UserStore()
    for value in records:
        apply_record(replayed, mr.decode(value))
    assert replayed.scram["SCRAM-SHA-512"]["u"] == store.scram["SCRAM-SHA-512"]["u"]
    assert describe(replayed, None) == [("u", 0, None, [(MECHANISMS["SCRAM-SHA-512"], 4096)])]
    delete = type("D", (), {"name": "u", "mechanism": 2})()
    outcomes, records = alter(store, [delete, delete], [])
    assert outcomes[0].error == 92  # DUPLICATE_RESOURCE, as Kafka answers a repeated change
    outcomes, records = alter(store, [delete], [])
    for value in records:
        apply_record(replayed, mr.decode(value))
    assert describe(replayed, ["u"])[0][1] == 91  # RESOURCE_NOT_FOUND


def test_the_state_machine_refuses_out_of_order_tokens() -> None:
    users = UserStore()
    users.add("alice", "pw", scram=())
    auth = Authenticator(SaslSettings(["PLAIN"], users))
    assert auth.api_versions_allowed() and not auth.api_versions_allowed()
    with pytest.raises(Refused):
        auth.token(b"\x00alice\x00pw")  # before any handshake
    auth = Authenticator(SaslSettings(["PLAIN"], users))
    assert not auth.handshake(1, "SCRAM-SHA-256") and auth.state is State.FAILED
    auth = Authenticator(SaslSettings(["PLAIN"], users))
    assert auth.handshake(1, "PLAIN")
    with pytest.raises(Refused, match="expected 3 tokens, got 2"):
        auth.token(b"alice\x00pw")
    auth = Authenticator(SaslSettings(["PLAIN"], users))
    auth.handshake(1, "PLAIN")
    assert auth.token(b"alice\x00alice\x00pw", 2) == b"" and auth.principal == "User:alice"
    assert auth.session_lifetime_ms(0) == 0 and not auth.has_lifetime()


def _client_exchange(mechanism: str, user: str, password: str, exchange: ScramExchange) -> bytes:
    """An RFC 5802 client run against the server's exchange; the server's final message."""
    import base64
    import hashlib
    import hmac

    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    bare = f"n={user},r=clientnonce"
    server_first = exchange.step(f"n,,{bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    assert fields["r"].startswith("clientnonce")
    salted = hashlib.pbkdf2_hmac(
        name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", name)
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(name, client_key).digest(), auth, name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = exchange.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    expected = hmac.digest(hmac.digest(salted, b"Server Key", name), auth, name)
    assert final == b"v=" + base64.b64encode(expected)
    return final


@pytest.mark.parametrize("salt", [b"", b"short", b"s" * 16])
def test_the_scram_exchange_takes_any_salt_kafka_stores(salt: bytes) -> None:
    # Kafka keeps the salt an admin client chose, whatever its length, and sends it back.
    import hashlib

    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    credential = from_salted_password("SCRAM-SHA-256", salt, salted, 4096)
    exchange = ScramExchange("SCRAM-SHA-256", lambda m, u: credential if u == "ann" else None)
    _client_exchange("SCRAM-SHA-256", "ann", "pw", exchange)
    assert exchange.complete and exchange.username == "ann"
    with pytest.raises(ScramFailed, match="Invalid client credentials"):
        _client_exchange("SCRAM-SHA-256", "ann", "wrong", ScramExchange(
            "SCRAM-SHA-256", lambda m, u: credential
        ))  # fmt: skip


def test_the_scram_exchange_refuses_as_kafkas_scram_server() -> None:
    credential = make_credential("SCRAM-SHA-512", "pw")

    def exchange() -> ScramExchange:
        return ScramExchange("SCRAM-SHA-512", lambda m, u: credential if u == "a,b" else None)

    # The username's escapes (RFC 5802's saslname), and users with no credential.
    assert exchange().step(b"n,,n=a=2Cb,r=x").startswith(b"r=x")
    with pytest.raises(ScramFailed, match="Invalid user credentials"):
        exchange().step(b"n,,n=nobody,r=x")
    # Channel binding ("p=", "y") is not Kafka's: the message does not parse.
    for first in (b"p=tls-unique,,n=a=2Cb,r=x", b"n,,r=x", b"n,,n=a=b,r=x"):
        with pytest.raises(ScramFailed):
            exchange().step(first)
    with pytest.raises(ScramFailed, match="different from username"):
        exchange().step(b"n,a=other,n=a=2Cb,r=x")
    server = exchange()
    server.step(b"n,,n=a=2Cb,r=x")
    with pytest.raises(ScramFailed, match="Invalid client nonce"):
        server.step(b"c=biws,r=xother,p=AAAA")


def test_an_upsertion_with_no_salt_is_kept_and_one_with_no_salted_password_fails() -> None:
    store = UserStore()
    upsert = type("U", (), {"name": "u", "mechanism": 1, "iterations": 4096, "salt": b"",
                            "salted_password": b"p" * 32})()  # fmt: skip
    outcomes, records = alter(store, [], [upsert])
    assert [(o.user, o.error) for o in outcomes] == [("u", 0)] and records
    upsert.salted_password = b""
    outcomes, records = alter(store, [], [upsert])
    assert [(o.user, o.error, o.message) for o in outcomes] == [("u", -1, None)] and not records
