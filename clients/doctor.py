"""`minicoord doctor HOST:PORT [-X key=value ...]`: a server seen as a client sees it.

It connects to the bootstrap address as any Kafka client would and asks what a client asks
before it does anything: ApiVersions (which APIs and versions, finalized features), Metadata
(the brokers and their advertised listeners, topics), ListGroups, and FindCoordinator for a
`group.id` or `transactional.id` given. Then it says which kinds of client can work there,
and whether each `-X` setting can, with the reason when not: the question to ask when a
consumer hangs without a word.

With `security.protocol=SSL` or `SASL_SSL` it speaks TLS, set up from the client's `ssl.*`
settings as librdkafka reads them, and plaintext only when that fails.

Exit status: 0 every setting given can work; 1 one cannot (or the advertised listeners are
unreachable from here, which stops every client after bootstrap, or the listener's TLS
certificate is not one the settings trust); 2 a malformed -X; 3 no Kafka answer at that
address. A comma-separated list (bootstrap.servers) is tried in turn until one answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from minicoord.clients.connection import ProtocolClient, parse_address
from minicoord.clients.doctor_checks import (
    CANNOT,
    DEFAULT_SASL_MECHANISM,
    FIND_COORDINATOR,
    METADATA,
    OK,
    SASL_HANDSHAKE,
    Advertised,
    Finding,
    api_name,
    check_settings,
    features,
    librdkafka_bool,
)
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode

LIST_GROUPS = 16
UNSUPPORTED_VERSION = 35


def parse_settings(pairs: list[str]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"-X {pair!r}: expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    return settings


def tls_context(settings: dict[str, str]) -> Any:
    """For `security.protocol=SSL` or `SASL_SSL`, an SSL context built from librdkafka's
    `ssl.*` settings as a client builds it (None otherwise); ValueError for a file it cannot
    use."""
    if settings.get("security.protocol", "").upper() not in ("SSL", "SASL_SSL"):
        return None
    import ssl

    try:
        context = ssl.create_default_context(cafile=settings.get("ssl.ca.location") or None)
        verify = settings.get("enable.ssl.certificate.verification", "true")
        if librdkafka_bool(verify) is False:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif settings.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
            context.check_hostname = False
        certificate = settings.get("ssl.certificate.location")
        if certificate:
            context.load_cert_chain(
                certificate,
                settings.get("ssl.key.location") or None,
                settings.get("ssl.key.password") or None,
            )
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"the ssl.* settings cannot be used: {exc}") from exc
    return context


def _version(adv: Advertised, key: int) -> int:
    """The highest version both the server and our codec speak."""
    return min(adv.apis[key][1], SPECS[key].max_version)


async def examine(
    host: str, port: int, settings: dict[str, str], timeout: float, tls: Any = None
) -> dict[str, Any]:
    """Everything the doctor learns, as plain data (what `--json` prints). With `tls` (an
    SSL context, for SSL and SASL_SSL) it speaks TLS first, as the client would, and plaintext
    only when that fails, to tell a listener that does not speak TLS."""
    report: dict[str, Any] = {"bootstrap": f"{host}:{port}", "settings": settings}
    client_id = settings.get("client.id", "minicoord-doctor")
    client, adv, failed = None, None, None
    if tls is not None:
        client, adv, failed = await _first_answer(host, port, client_id, timeout, tls)
        if adv is None:
            report["tls_error"] = failed
            if failed is not None and "CERTIFICATE_VERIFY_FAILED" in failed:
                report["tls_untrusted"] = True
                report["tls_error"] = (
                    f"{failed}: the listener speaks TLS, with a certificate your settings do "
                    "not trust (ssl.ca.location names the CA that signed it)"
                )
    if adv is None:
        tls = None
        client, adv, failed = await _first_answer(host, port, client_id, timeout, None)
    if adv is None or client is None:
        tls_failed = report.get("tls_error")
        report["error"] = f"{tls_failed}; in plaintext: {failed}" if tls_failed else failed
        return report
    report["apis"] = [
        {"key": k, "name": api_name(k), "min": low, "max": high}
        for k, (low, high) in sorted(adv.apis.items())
    ]
    report["finalized_features"] = adv.features
    extra: dict[str, Any] = {"plaintext": tls is None, "tls_error": report.get("tls_error")}
    try:
        await _ask(client, adv, settings, report, extra, (host, port), timeout)
    except Exception as exc:
        # Typically a listener that wants SASL first: it closes on anything but the handshake.
        why = _why(exc, timeout)
        if adv.has(SASL_HANDSHAKE) and isinstance(exc, ConnectionError):
            why += " (the listener probably requires SASL authentication first)"
        report["unanswered"] = why
    finally:
        await client.close()
    mechanism = settings.get("sasl.mechanism", settings.get("sasl.mechanisms"))
    if not mechanism and settings.get("security.protocol", "").upper().startswith("SASL_"):
        # A client given no mechanism tries its default one: ask for that.
        mechanism = DEFAULT_SASL_MECHANISM
    if mechanism and adv.has(SASL_HANDSHAKE):
        extra["sasl"] = await _sasl_mechanisms(host, port, client_id, mechanism, timeout, tls)
    report["features"] = [f.as_dict() for f in features(adv)]
    report["listeners"] = _listeners(report).as_dict()
    report["checks"] = [f.as_dict() for f in check_settings(adv, settings, extra)]
    return report


async def _first_answer(
    host: str, port: int, client_id: str, timeout: float, tls: Any
) -> tuple[ProtocolClient | None, Advertised | None, str | None]:
    """A connection (TLS with an SSL context) and its ApiVersions answer, or why not."""
    how = "TLS" if tls is not None else "plaintext"
    try:
        client = await asyncio.wait_for(
            ProtocolClient.connect(host, port, client_id, ssl=tls), timeout
        )
    except (OSError, TimeoutError) as exc:
        return None, None, f"cannot connect to {host}:{port} ({how}): {_why(exc, timeout)}"
    try:
        return client, await asyncio.wait_for(_api_versions(client), timeout), None
    except Exception as exc:
        await client.close()
        hint = (
            "a TLS listener, or not Kafka?"
            if tls is None
            else "not Kafka, or a listener wanting a client certificate (ssl.certificate.location)?"
        )
        return (
            None,
            None,
            (
                f"connected to {host}:{port}, but it did not answer ApiVersions in the {how} "
                f"Kafka protocol ({_why(exc, timeout)}): {hint}"
            ),
        )


def _why(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    return str(exc) or type(exc).__name__


async def _ask(
    client: ProtocolClient,
    adv: Advertised,
    settings: dict[str, str],
    report: dict[str, Any],
    extra: dict[str, Any],
    bootstrap: tuple[str, int],
    timeout: float,
) -> None:
    """What a client asks after ApiVersions: Metadata, groups, coordinators."""
    if adv.has(METADATA):
        report.update(await asyncio.wait_for(_metadata(client, adv), timeout))
        for broker in report["brokers"]:
            broker["reachable"] = await _reachable(
                broker["host"], broker["port"], bootstrap, timeout
            )
    if adv.has(LIST_GROUPS):
        report["groups"] = await asyncio.wait_for(_groups(client, adv), timeout)
    if "group.id" in settings and adv.has(FIND_COORDINATOR):
        found = await asyncio.wait_for(_coordinator(client, adv, settings["group.id"], 0), timeout)
        if not found.get("error"):
            found["reachable"] = await _reachable(found["host"], found["port"], bootstrap, timeout)
        extra["coordinator"] = found
    if "transactional.id" in settings and adv.has(FIND_COORDINATOR, 1):
        extra["transaction_coordinator"] = await asyncio.wait_for(
            _coordinator(client, adv, settings["transactional.id"], 1), timeout
        )


async def _api_versions(client: ProtocolClient) -> Advertised:
    request = ApiVersionsRequest(
        version=3, client_software_name="minicoord-doctor", client_software_version="1"
    )
    response = await client.request(request, 3)
    if response.error_code not in (0, UNSUPPORTED_VERSION):
        raise RuntimeError(f"ApiVersions answered error {response.error_code}")
    # An UNSUPPORTED_VERSION answer (v0, KIP-511) still lists every API.
    apis = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
    finalized = getattr(response, "finalized_features", None) or []
    return Advertised(apis, {f.name: f.max_version_level for f in finalized})


async def _metadata(client: ProtocolClient, adv: Advertised) -> dict[str, Any]:
    version = _version(adv, METADATA)
    fields: dict[str, Any] = {"topics": [] if version == 0 else None}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    response = await client.request(MetadataRequest(version=version, **fields), version)
    return {
        "cluster_id": getattr(response, "cluster_id", None),
        "controller_id": getattr(response, "controller_id", None),
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in response.brokers
        ],
        "topics": sorted(
            (
                {
                    "name": t.name,
                    "partitions": len(t.partitions or ()),
                    "internal": bool(getattr(t, "is_internal", False)),
                    "error": t.error_code,
                }
                for t in response.topics
            ),
            key=lambda t: t["name"] or "",
        ),
    }


async def _groups(client: ProtocolClient, adv: Advertised) -> list[dict[str, Any]]:
    version = _version(adv, LIST_GROUPS)
    fields: dict[str, Any] = {}
    if version >= 4:
        fields["states_filter"] = []
    if version >= 5:
        fields["types_filter"] = []
    response = await client.request(ListGroupsRequest(version=version, **fields), version)
    return sorted(
        (
            {
                "group": g.group_id,
                "type": getattr(g, "group_type", None) or "classic",
                "state": getattr(g, "group_state", None),
                "protocol_type": g.protocol_type,
            }
            for g in response.groups
        ),
        key=lambda g: g["group"],
    )


async def _coordinator(
    client: ProtocolClient, adv: Advertised, key: str, key_type: int
) -> dict[str, Any]:
    version = _version(adv, FIND_COORDINATOR)
    if version >= 4:
        request = FindCoordinatorRequest(version=version, key_type=key_type, coordinator_keys=[key])
        found: Any = (await client.request(request, version)).coordinators[0]
    else:
        fields = {"key_type": key_type} if version >= 1 else {}
        found = await client.request(
            FindCoordinatorRequest(version=version, key=key, **fields), version
        )
    if found.error_code:
        message = getattr(found, "error_message", None)
        return {"error": _error_name(found.error_code) + (f" ({message})" if message else "")}
    return {"node_id": found.node_id, "host": found.host, "port": found.port}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


async def _reachable(host: str, port: int, bootstrap: tuple[str, int], timeout: float) -> bool:
    if (host, port) == bootstrap:
        return True
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), min(timeout, 3))
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def _sasl_mechanisms(
    host: str, port: int, client_id: str, mechanism: str, timeout: float, tls: Any = None
) -> dict[str, Any] | None:
    """Whether the server takes `mechanism`, and the mechanisms it names: a SaslHandshake on
    a connection of its own (the handshake commits a connection to authenticating)."""
    from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

    try:
        client = await asyncio.wait_for(
            ProtocolClient.connect(host, port, client_id, ssl=tls), timeout
        )
        try:
            request = SaslHandshakeRequest(version=1, mechanism=mechanism)
            request.with_header(correlation_id=1, client_id=client_id)
            raw = await asyncio.wait_for(
                client.request_raw(bytes(request.encode(header=True)), 1), timeout
            )
        finally:
            await client.close()
        answer = SaslHandshakeResponse.decode(memoryview(raw)[4:], version=1)
    except Exception:
        return None
    return {
        "accepted": answer.error_code == 0,
        "enabled": list(answer.mechanisms or []),
        "error": answer.error_code,
    }


def _listeners(report: dict[str, Any]) -> Finding:
    brokers = report.get("brokers")
    if not brokers:
        return Finding("advertised listeners", "not checked", "no Metadata answer")
    away = [b for b in brokers if not b.get("reachable")]
    if away:
        where = ", ".join(f"node {b['node_id']} at {b['host']}:{b['port']}" for b in away)
        return Finding(
            "advertised listeners",
            CANNOT,
            f"{where} unreachable from here: clients bootstrap, then fail to connect "
            "(set the server's advertised.listeners to an address clients can reach)",
        )
    return Finding("advertised listeners", OK, "every advertised broker is reachable")


def exit_status(report: dict[str, Any]) -> int:
    if "error" in report:
        # A listener that speaks TLS with a certificate the client's settings do not trust
        # is Kafka's, most likely; it is the settings that cannot work there.
        return 1 if report.get("tls_untrusted") else 3
    findings = [report["listeners"], *report["checks"]]
    return 1 if any(f["verdict"] == CANNOT for f in findings) else 0


def run(args: argparse.Namespace) -> int:
    try:
        settings = parse_settings(args.settings)
        # A bootstrap.servers list, as pasted from a client's settings: each address in turn,
        # as a client bootstraps, until one answers.
        addresses = [
            parse_address(a.strip(), default_host="127.0.0.1")
            for a in args.bootstrap.split(",")
            if a.strip()
        ]
        if not addresses:
            raise ValueError(f"expected HOST:PORT, got {args.bootstrap!r}")
        tls = tls_context(settings)
    except ValueError as exc:
        print(f"minicoord: {exc}", file=sys.stderr)
        return 2
    for host, port in addresses:
        report = asyncio.run(examine(host, port, settings, args.timeout, tls))
        if "error" not in report:
            break
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    else:
        from minicoord.clients.doctor_text import render

        print(render(report))
    return exit_status(report)
