"""Kafka's listener configs: custom listener names through the protocol map, per-listener
advertised addresses in Metadata and FindCoordinator, and the config errors."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from minicoord.server.config import Config, ConfigError
from minicoord.server.security.listeners import listeners_of
from minicoord.testing.embedded import EmbeddedServer, running
from rawkit import Raw, plain_token

CUSTOM = {
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
    "advertised.listeners": "INTERNAL://internal.test:19092,EXTERNAL://external.test:29092",
}


def test_each_listener_advertises_its_own_address() -> None:
    listeners = "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"
    with running(CUSTOM, listeners=listeners, users={"alice": "pw"}) as server:
        assert server.client("EXTERNAL").security_protocol == "SASL_PLAINTEXT"
        internal = Raw(server.address_of("INTERNAL"))
        broker = internal.metadata().brokers[0]
        assert (broker.host, broker.port) == ("internal.test", 19092)
        external = Raw(server.address_of("EXTERNAL"))
        assert external.handshake("PLAIN").error_code == 0
        assert external.authenticate(plain_token("alice", "pw")).error_code == 0
        broker = external.metadata().brokers[0]
        assert (broker.host, broker.port) == ("external.test", 29092)
        external.send(FindCoordinatorRequest(version=1, key="g", key_type=0), 1)
        found = external.answer(FindCoordinatorResponse, 1)
        assert (found.host, found.port) == ("external.test", 29092)
        external.close()
        internal.close()


def test_a_listener_left_out_of_advertised_listeners_advertises_its_own_address() -> None:
    # Only INTERNAL is advertised: a client on EXTERNAL must not be sent to INTERNAL's address
    # (it could speak another protocol there); it gets the address it connected to.
    settings = {
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "advertised.listeners": "INTERNAL://internal.test:19092",
    }
    with running(settings, listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0") as server:
        external = Raw(server.address_of("EXTERNAL"))
        broker = external.metadata().brokers[0]
        external.send(FindCoordinatorRequest(version=1, key="g", key_type=0), 1)
        found = external.answer(FindCoordinatorResponse, 1)
        external.close()
        host, port = server.address_of("EXTERNAL").rsplit(":", 1)
        assert (broker.host, broker.port) == (found.host, found.port) == (host, int(port))
        internal = Raw(server.address_of("INTERNAL"))
        broker = internal.metadata().brokers[0]
        internal.close()
        assert (broker.host, broker.port) == ("internal.test", 19092)


def test_an_empty_advertised_host_or_port_is_the_address_connected_to() -> None:
    # Kafka fills these from its host name and bound port (ListenerInfo's
    # withWildcardHostnamesResolved, withEphemeralPortsCorrected): the address a client reached
    # is this server's equivalent, and port 0 must never be advertised.
    for advertised, expect_host in (
        ("PLAINTEXT://:0", None),
        ("PLAINTEXT://proxy.test:0", "proxy.test"),
    ):
        with running({"advertised.listeners": advertised}) as server:
            client = Raw(server.bootstrap)
            broker = client.metadata().brokers[0]
            client.close()
            assert (broker.host, broker.port) == (expect_host or "127.0.0.1", server.port)
            assert broker.port != 0


def test_host_and_port_still_make_the_one_plaintext_listener() -> None:
    [only] = listeners_of(Config(), "127.0.0.1", 9092)
    assert (only.name, only.protocol, only.host, only.port) == (
        "PLAINTEXT",
        "PLAINTEXT",
        "127.0.0.1",
        9092,
    )
    # advertised.listeners as before: PLAINTEXT://HOST:PORT for that one listener
    config = Config.from_pairs({"advertised.listeners": "PLAINTEXT://proxy.test:1234"})
    assert listeners_of(config)[0].advertised == ("proxy.test", 1234)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "FOO://127.0.0.1:1"}, "no security protocol"),
        ({"listeners": "PLAINTEXT://127.0.0.1"}, "NAME://HOST:PORT"),
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "only once"),
        ({"listeners": "SSL://127.0.0.1:1"}, "ssl.keystore.location"),
        ({"listeners": "SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"listener.security.protocol.map": "X:TLS"}, "listener.security.protocol.map"),
        (
            {"listeners": "PLAINTEXT://:1", "advertised.listeners": "OTHER://h:1,X://h:2"},
            "not in listeners",
        ),
        ({"ssl.client.auth": "maybe", "listeners": "PLAINTEXT://:1"}, "ssl.client.auth"),
        (
            {
                "listeners": "SSL://127.0.0.1:1",
                "ssl.keystore.location": "server.pem",
                "ssl.keystore.password": "pw",
            },
            "key store password cannot be specified with PEM",
        ),
        # Kafka refuses these at start too (KafkaConfig): a name no listener has, even the
        # one advertised name beside the default PLAINTEXT listener, and the meta-address.
        ({"advertised.listeners": "SSL://h:1"}, r"names SSL, not in listeners \(PLAINTEXT\)"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:1"}, "meta-address"),
        ({"advertised.listeners": "PLAINTEXT://[::]:1"}, "meta-address"),
        ({"listeners": "PLAINTEXT://:70000"}, r"port 70000 .* not a port \(0-65535\)"),
    ],
)
def test_config_errors(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config.from_pairs(settings)


def test_jaas_errors_never_echo_a_value() -> None:
    from minicoord.server.security.sasl import load_users

    config = Config.from_pairs({"sasl.jaas.config": 'x required user_a="s3cret'})
    with pytest.raises(ConfigError) as caught:
        load_users(config)
    assert "s3cret" not in str(caught.value)


def test_describe_configs_hides_secrets() -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="s3cret";'
    with running({"sasl.jaas.config": jaas}) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "0")
        [entries] = [f.result(10) for f in admin.describe_configs([resource]).values()]
        entry = entries["sasl.jaas.config"]
        assert entry.is_sensitive and entry.value is None
        assert entries["listeners"].value == ""


def test_requested_client_auth_takes_a_certificate_or_none() -> None:
    from rawkit import client_tls

    with running(listeners="SSL://127.0.0.1:0", ssl_client_auth="requested") as server:
        tls = server.tls
        assert tls is not None
        anonymous = Raw(server.address_of("SSL"), client_tls(str(tls.ca)))
        assert anonymous.api_versions().error_code == 0
        named = Raw(
            server.address_of("SSL"),
            client_tls(str(tls.ca), str(tls.client_cert), str(tls.client_key)),
        )
        assert named.api_versions().error_code == 0
        principals = server.call(
            lambda: sorted(c.principal for c in server.server.broker.connections)
        )
        assert principals == ["User:ANONYMOUS", "User:CN=client,O=minicoord"]
        anonymous.close()
        named.close()


def test_certificates_made_for_a_server_go_with_it() -> None:
    # Made in a temporary directory, private keys included: kept across a stop and a second
    # start of the same server, removed once the server object goes (a suite that starts a
    # TLS server per test must not leave a directory of keys per test behind).
    import gc

    server = EmbeddedServer(listeners="SSL://127.0.0.1:0")
    assert server.tls is not None
    directory = server.tls.ca.parent
    for _ in range(2):
        with server:
            raw = Raw(server.address_of("SSL"), _ca(server))
            assert raw.api_versions().error_code == 0
            raw.close()
        assert (directory / "server.key").exists()
    del server
    gc.collect()
    assert not directory.exists()


def _ca(server: EmbeddedServer) -> object:
    from rawkit import client_tls

    assert server.tls is not None
    return client_tls(str(server.tls.ca))


def test_client_settings_for_a_listener_or_user_the_server_lacks_say_so() -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    with running(listeners=listeners, users={"alice": "pw"}) as server:
        assert server.client("SASL_PLAINTEXT", "alice").password == "pw"
        with pytest.raises(ValueError, match="no user 'bob' on this server; its users: alice"):
            server.client("SASL_PLAINTEXT", "bob")
        with pytest.raises(ValueError, match="no listener SSL; this server has PLAINTEXT, SASL"):
            server.client("SSL")
