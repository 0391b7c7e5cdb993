"""Whether a client configuration can work against what a server advertises.

The rules a client applies before it sends anything, from the ApiVersions answer: a
`group.protocol=consumer` consumer needs ConsumerGroupHeartbeat, SASL needs SaslHandshake,
an idempotent producer needs InitProducerId, and so on. Settings are named as librdkafka
(confluent-kafka, kcat, …) names them; the Java names of the same settings are accepted too.
Each finding is a verdict ("ok", "cannot work", "warning", "not checked") with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OK, CANNOT, WARNING, UNCHECKED = "ok", "cannot work", "warning", "not checked"

# The APIs each client role cannot do without (classic protocol where there is a choice).
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
SASL_HANDSHAKE, SASL_AUTHENTICATE, INIT_PRODUCER_ID = 17, 36, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
CONSUMER_GROUP_HEARTBEAT = 68
CLASSIC_GROUP = (FIND_COORDINATOR, JOIN, SYNC, HEARTBEAT, LEAVE, OFFSET_COMMIT, OFFSET_FETCH)
TRANSACTIONS = (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
# Java's names for the same settings.
ALIASES = {"compression.codec": "compression.type", "sasl.mechanisms": "sasl.mechanism"}


@dataclass(frozen=True, slots=True)
class Finding:
    subject: str  # "group.protocol=consumer", or a feature ("idempotent producer")
    verdict: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"subject": self.subject, "verdict": self.verdict, "reason": self.reason}


class Advertised:
    """What one ApiVersions answer says: versions by API key, finalized features."""

    def __init__(self, apis: dict[int, tuple[int, int]], features: dict[str, int]) -> None:
        self.apis = apis
        self.features = features

    def has(self, key: int, min_version: int = 0) -> bool:
        found = self.apis.get(key)
        return found is not None and found[1] >= min_version

    def missing(self, keys: tuple[int, ...] | list[int]) -> list[str]:
        return [f"{api_name(k)} (key {k})" for k in keys if k not in self.apis]

    def versions(self, key: int) -> str:
        low, high = self.apis[key]
        return f"v{low}-{high}"


def api_name(key: int) -> str:
    try:
        from kafka.protocol.api_key import ApiKey

        return ApiKey(key).name
    except (ImportError, ValueError):
        return f"ApiKey{key}"


def features(adv: Advertised) -> list[Finding]:
    """What kinds of client can work here at all, whatever their settings."""
    out = []

    def need(subject: str, keys: tuple[int, ...], note: str = "") -> None:
        missing = adv.missing(keys)
        if missing:
            out.append(Finding(subject, CANNOT, "not advertised: " + ", ".join(missing)))
        else:
            out.append(Finding(subject, OK, note or "every API it needs is advertised"))

    need("producer", (METADATA, PRODUCE))
    need("consumer (assigned partitions)", (METADATA, FETCH, LIST_OFFSETS))
    need("consumer group, classic protocol", CLASSIC_GROUP)
    out.append(_consumer_protocol(adv, "consumer group, consumer protocol (KIP-848)"))
    need("idempotent producer", (INIT_PRODUCER_ID,))
    need("transactions", (INIT_PRODUCER_ID, *TRANSACTIONS))
    # Every Kafka listener advertises these, SASL or not: what this row can say is only that
    # a SASL client may try; whether this listener takes SASL is the security.protocol check.
    need(
        "SASL authentication",
        (SASL_HANDSHAKE, SASL_AUTHENTICATE),
        "SaslHandshake and SaslAuthenticate advertised, as on every Kafka listener; whether "
        "this one takes SASL, -X security.protocol=SASL_... checks",
    )
    return out


def _consumer_protocol(adv: Advertised, subject: str) -> Finding:
    if not adv.has(CONSUMER_GROUP_HEARTBEAT):
        return Finding(
            subject,
            CANNOT,
            "ConsumerGroupHeartbeat (key 68) is not advertised: a group.protocol=consumer "
            "consumer never joins (librdkafka waits and retries without a word; use "
            "group.protocol=classic)",
        )
    low = [k for k in (OFFSET_COMMIT, OFFSET_FETCH) if not adv.has(k, 9)]
    if low:
        names = ", ".join(f"{api_name(k)} v9+" for k in low)
        return Finding(subject, CANNOT, f"members commit with their epoch: {names} not advertised")
    note = f"ConsumerGroupHeartbeat {adv.versions(CONSUMER_GROUP_HEARTBEAT)} advertised"
    level = adv.features.get("group.version")
    if level is not None:
        note += f"; group.version {level} finalized"
    elif adv.features:
        return Finding(subject, WARNING, note + ", but group.version is not a finalized feature")
    return Finding(subject, OK, note)


def check_settings(
    adv: Advertised, settings: dict[str, str], extra: dict[str, Any]
) -> list[Finding]:
    """One finding per setting. `extra` holds what the doctor learned beyond ApiVersions:
    `plaintext` (the listener answered plaintext Kafka), `sasl` (the SaslHandshake answer to
    the mechanism, if asked), `coordinator` (FindCoordinator for group.id),
    `transaction_coordinator`."""
    out = []
    for raw_key, value in settings.items():
        key = ALIASES.get(raw_key, raw_key)
        subject = f"{raw_key}={value}"
        rule = RULES.get(key)
        if rule is None:
            out.append(Finding(subject, UNCHECKED, "no server API decides this setting"))
            continue
        verdict, reason = rule(adv, value.strip(), settings, extra)
        out.append(Finding(subject, verdict, reason))
    return out


# (what is advertised, the setting's value, all settings, what else was learned) -> (verdict, why)
Rule = Callable[[Advertised, str, dict[str, str], dict[str, Any]], tuple[str, str]]


def _security(
    adv: Advertised, value: str, settings: dict[str, str], extra: dict[str, Any]
) -> tuple[str, str]:
    protocol = value.upper()
    reasons = []
    if protocol in ("SSL", "SASL_SSL") and extra.get("plaintext"):
        failed = extra.get("tls_error")
        reasons.append(
            "this listener answered plaintext Kafka requests, so it does not speak TLS: the "
            "client's TLS handshake fails here" + (f" ({failed})" if failed else "")
        )
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        missing = adv.missing((SASL_HANDSHAKE, SASL_AUTHENTICATE))
        if missing:
            reasons.append(
                f"{' and '.join(missing)} not advertised: the server does no SASL authentication"
            )
        elif (answer := extra.get("sasl") or {}).get("error") == ILLEGAL_SASL_STATE:
            reasons.append(_NO_SASL)
        elif answer and not answer["accepted"] and not _MECHANISM_KEYS & settings.keys():
            enabled = ", ".join(answer["enabled"]) or "none"
            reasons.append(
                f"SaslHandshake refused {DEFAULT_SASL_MECHANISM}, the mechanism clients use "
                f"when sasl.mechanism is not set (enabled: {enabled})"
            )
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        return (
            CANNOT,
            f"{value!r} is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
        )
    if reasons:
        return CANNOT, "; ".join(reasons)
    if protocol == "PLAINTEXT":
        return OK, "the listener answered plaintext Kafka requests"
    if protocol == "SSL":
        return OK, "the listener answered Kafka requests over TLS"
    if protocol == "SASL_SSL":
        return (
            OK,
            "the listener answered Kafka over TLS and advertises SASL (no credentials checked)",
        )
    return OK, "the APIs it needs are advertised (credentials are not checked)"


# What a listener without SASL answers a SaslHandshake with, as Kafka's does.
ILLEGAL_SASL_STATE = 34
# librdkafka's and the Java client's sasl.mechanism when none is set.
DEFAULT_SASL_MECHANISM = "GSSAPI"
_MECHANISM_KEYS = {"sasl.mechanism", "sasl.mechanisms"}
_NO_SASL = (
    "SaslHandshake answered ILLEGAL_SASL_STATE: this listener does no SASL authentication "
    "(a SASL listener is another port)"
)


def _sasl_mechanism(
    adv: Advertised, value: str, _: dict[str, str], extra: dict[str, Any]
) -> tuple[str, str]:
    if not adv.has(SASL_HANDSHAKE):
        return CANNOT, "SaslHandshake (key 17) is not advertised: the server does no SASL"
    answer = extra.get("sasl")
    if answer is None:
        return UNCHECKED, "the server's SaslHandshake could not be asked"
    if answer.get("error") == ILLEGAL_SASL_STATE:
        return CANNOT, _NO_SASL
    if not answer["accepted"]:
        enabled = ", ".join(answer["enabled"]) or "none"
        return CANNOT, f"SaslHandshake refused mechanism {value} (enabled: {enabled})"
    return OK, "SaslHandshake accepts it (credentials are not checked)"


def _group_protocol(
    adv: Advertised, value: str, _: dict[str, str], __: dict[str, Any]
) -> tuple[str, str]:
    if value.lower() == "consumer":
        finding = _consumer_protocol(adv, "")
        return finding.verdict, finding.reason
    if value.lower() == "classic":
        missing = adv.missing(CLASSIC_GROUP)
        if missing:
            return CANNOT, "not advertised: " + ", ".join(missing)
        return OK, f"JoinGroup {adv.versions(JOIN)}, SyncGroup {adv.versions(SYNC)} advertised"
    return CANNOT, f"{value!r} is not a group protocol (classic or consumer)"


def _group_id(
    adv: Advertised, value: str, _: dict[str, str], extra: dict[str, Any]
) -> tuple[str, str]:
    coordinator = extra.get("coordinator")
    if not adv.has(FIND_COORDINATOR):
        return CANNOT, "FindCoordinator (key 10) is not advertised"
    if coordinator is None:
        return UNCHECKED, "FindCoordinator was not asked"
    if coordinator.get("error"):
        return CANNOT, f"FindCoordinator answered {coordinator['error']}"
    where = f"{coordinator['host']}:{coordinator['port']}"
    if not coordinator.get("reachable"):
        return (
            CANNOT,
            f"its coordinator is node {coordinator['node_id']} at {where}, unreachable from here",
        )
    return OK, f"its coordinator is node {coordinator['node_id']} at {where}"


def librdkafka_bool(value: str) -> bool | None:
    """A boolean property as librdkafka reads it (true/t/1, false/f/0, any case); None for
    anything else, which it refuses ("Expected bool value")."""
    return {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}.get(
        value.strip().lower()
    )


def _idempotence(
    adv: Advertised, value: str, _: dict[str, str], __: dict[str, Any]
) -> tuple[str, str]:
    on = librdkafka_bool(value)
    if on is None:
        return CANNOT, f"{value!r} is not a boolean: the client refuses it (true or false)"
    if not on:
        return OK, "idempotence off: nothing more needed"
    if not adv.has(INIT_PRODUCER_ID):
        return (
            CANNOT,
            "InitProducerId (key 22) is not advertised: no producer ids to be idempotent with",
        )
    if not adv.has(PRODUCE, 3):
        return CANNOT, "idempotent batches need Produce v3+"
    return OK, f"InitProducerId {adv.versions(INIT_PRODUCER_ID)} advertised"


def _transactional_id(
    adv: Advertised, value: str, _: dict[str, str], extra: dict[str, Any]
) -> tuple[str, str]:
    missing = adv.missing((INIT_PRODUCER_ID, *TRANSACTIONS))
    if missing:
        return CANNOT, "transactions need " + ", ".join(missing) + ", not advertised"
    error = (extra.get("transaction_coordinator") or {}).get("error")
    if error:
        return CANNOT, f"FindCoordinator for the transactional id answered {error}"
    return OK, "the transaction APIs are advertised"


def _isolation(
    adv: Advertised, value: str, _: dict[str, str], __: dict[str, Any]
) -> tuple[str, str]:
    if value.lower() not in ("read_committed", "read_uncommitted"):
        return CANNOT, f"{value!r} is not an isolation level"
    if not adv.has(FETCH, 4):
        return CANNOT, "isolation levels need Fetch v4+"
    if value.lower() == "read_committed" and adv.missing(TRANSACTIONS):
        return (
            OK,
            "Fetch v4+ advertised; with no transactions served it reads what "
            "read_uncommitted reads",
        )
    return OK, f"Fetch {adv.versions(FETCH)} advertised"


def _compression(
    adv: Advertised, value: str, _: dict[str, str], __: dict[str, Any]
) -> tuple[str, str]:
    codec = value.lower()
    if codec not in ("none", "gzip", "snappy", "lz4", "zstd", "inherit"):
        return CANNOT, f"{value!r} is not a compression codec"
    if codec == "zstd" and not adv.has(PRODUCE, 7):
        return CANNOT, "zstd batches need Produce v7+"
    if not adv.has(PRODUCE):
        return CANNOT, "Produce (key 0) is not advertised"
    return OK, f"Produce {adv.versions(PRODUCE)} advertised"


RULES: dict[str, Rule] = {
    "security.protocol": _security,
    "sasl.mechanism": _sasl_mechanism,
    "group.protocol": _group_protocol,
    "group.id": _group_id,
    "enable.idempotence": _idempotence,
    "transactional.id": _transactional_id,
    "isolation.level": _isolation,
    "compression.type": _compression,
}
