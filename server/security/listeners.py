"""Kafka's listener configs: `listeners`, `advertised.listeners`, `listener.security.protocol.map`.

A listener is NAME://HOST:PORT; its name maps to one of the four security protocols (the
default map names each protocol after itself). Per-listener settings come from
`listener.name.<name lowercased>.<config>` first, then from the broker-wide config, as Kafka
reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.config import ConfigError

if TYPE_CHECKING:
    from minicoord.server.config import Config

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int
    # Host and port named in Metadata and FindCoordinator; None: the address connected to.
    advertised: tuple[str, int] | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def prefix(self) -> str:
        return f"listener.name.{self.name.lower()}."


def parse_endpoints(text: str, what: str) -> list[Endpoint]:
    """NAME://HOST:PORT,... (HOST empty or 0.0.0.0: every address; [v6] in brackets)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, address = part.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not port.isdigit():
            raise ConfigError(f"{what} takes NAME://HOST:PORT entries, not {part!r}")
        if int(port) > 65535:
            raise ConfigError(f"{what}: port {port} of {part!r} is not a port (0-65535)")
        if not all(c.isalnum() or c in "_-" for c in name):
            raise ConfigError(f"{what}: listener name {name!r} is not a valid name")
        out.append(Endpoint(name.upper(), host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(f"{what} names no listener")
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{what}: each listener name may appear only once")
    return out


def protocol_map(config: Config) -> dict[str, str]:
    out = {}
    for part in config.listener_security_protocol_map.split(","):
        if not part.strip():
            continue
        name, colon, protocol = part.partition(":")
        protocol = protocol.strip().upper()
        if not colon or protocol not in PROTOCOLS:
            raise ConfigError(
                "listener.security.protocol.map takes NAME:PROTOCOL entries, PROTOCOL one of "
                f"{', '.join(PROTOCOLS)}; not {part!r}"
            )
        out[name.strip().upper()] = protocol
    return out


def listeners_of(config: Config, host: str = "127.0.0.1", port: int = 9092) -> list[Listener]:
    """The listeners to bind: `listeners`, or one PLAINTEXT listener on host:port."""
    endpoints = (
        parse_endpoints(config.listeners, "listeners")
        if config.listeners
        else [Endpoint("PLAINTEXT", host, port)]
    )
    protocols = protocol_map(config)
    advertised: dict[str, tuple[str, int]] = {}
    if config.advertised_listeners:
        for e in parse_endpoints(config.advertised_listeners, "advertised.listeners"):
            advertised[e.name] = (e.host, e.port)
        # Kafka's KafkaConfig checks, at start: a name no listener has, or the meta-address,
        # would send clients to an address nothing serves. (An empty host or port 0 is
        # filled in from the address a client connected to, as Kafka fills them from its own
        # host name and bound port.)
        unknown = set(advertised) - {e.name for e in endpoints}
        if unknown:
            raise ConfigError(
                f"advertised.listeners names {', '.join(sorted(unknown))}, not in listeners "
                f"({', '.join(e.name for e in endpoints)})"
            )
        if any(host in ("0.0.0.0", "::") for host, _ in advertised.values()):
            raise ConfigError(
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0 (or ::): "
                "advertise a routable address"
            )
    out = []
    for e in endpoints:
        protocol = protocols.get(e.name)
        if protocol is None:
            raise ConfigError(
                f"listener {e.name} has no security protocol in listener.security.protocol.map"
            )
        out.append(Listener(e.name, protocol, e.host, e.port, advertised.get(e.name)))
    return out


def validate_listeners(config: Config) -> None:
    listeners = listeners_of(config)
    if any(lst.sasl for lst in listeners):
        from minicoord.server.security.sasl import enabled_mechanisms

        for lst in listeners:
            if lst.sasl:
                enabled_mechanisms(config, lst)
    for lst in listeners:
        if lst.tls and not (
            setting(config, lst, "ssl.keystore.location")
            or setting(config, lst, "ssl.keystore.certificate.chain")
        ):
            raise ConfigError(
                f"listener {lst.name} ({lst.protocol}) needs ssl.keystore.location (a PEM file "
                "with the key and certificate chain) or ssl.keystore.certificate.chain and "
                "ssl.keystore.key"
            )
        if lst.tls and setting(config, lst, "ssl.keystore.password"):
            # Kafka's DefaultSslEngineFactory refuses it for PEM: the key has its own password.
            raise ConfigError(
                f"listener {lst.name}: SSL key store password cannot be specified with PEM "
                "format, only key password (ssl.key.password) may be specified"
            )
        auth = setting(config, lst, "ssl.client.auth").lower()
        if auth not in ("none", "requested", "required"):
            raise ConfigError("ssl.client.auth is one of none, requested, required")


def setting(config: Config, listener: Listener, name: str) -> str:
    """A config as this listener sees it: its listener.name override, else the broker's."""
    wanted = listener.prefix + name
    found = None
    for key, value in config.listener_overrides:
        if key.lower() == wanted:
            found = value
    if found is not None:
        return found
    value = config.value_of(name)
    return "" if value is None else value


def mechanism_setting(config: Config, listener: Listener, mechanism: str, name: str) -> str:
    """listener.name.<l>.<mechanism>.<name> (e.g. plain.sasl.jaas.config), then as setting()."""
    wanted = f"{listener.prefix}{mechanism.lower()}.{name}"
    found = None
    for key, value in config.listener_overrides:
        if key.lower() == wanted:
            found = value
    if found is not None:
        return found
    return setting(config, listener, name)


def describe(listeners: list[Listener], bound: list[tuple[str, int]]) -> str:
    """The ready line's list: HOST:PORT alone for one PLAINTEXT listener (as always)."""
    if len(listeners) == 1 and listeners[0].protocol == "PLAINTEXT":
        return _address(*bound[0])
    return ", ".join(
        f"{_address(*addr)} ({lst.name}"
        + (f"/{lst.protocol}" if lst.protocol != lst.name else "")
        + ")"
        for lst, addr in zip(listeners, bound, strict=True)
    )


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
