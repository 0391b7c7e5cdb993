"""SCRAM users through the admin APIs: AlterUserScramCredentials and
DescribeUserScramCredentials (KIP-554), sans-IO. Changes become UserScramCredentialRecord /
RemoveUserScramCredentialRecord in the cluster metadata log, as KRaft keeps them, so they
survive a restart; the replay applies the same records.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import metadata_records as mr
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.security.sasl import UserStore
from minicoord.server.security.scram import (
    BY_TYPE,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    from_salted_password,
)


def credential_record(name: str, mechanism: int, c: ScramCredential) -> Any:
    """The UserScramCredentialRecord of one user's credential (`mechanism`: Kafka's type id)."""
    return mr.UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=c.salt,
        stored_key=c.stored_key,
        server_key=c.server_key,
        iterations=c.iterations,
    )


def apply_record(store: UserStore, record: Any) -> None:
    mechanism = BY_TYPE.get(record.mechanism)
    if mechanism is None:
        return
    users = store.scram[mechanism]
    if isinstance(record, mr.UserScramCredentialRecord):
        users[record.name] = ScramCredential(
            bytes(record.salt),
            bytes(record.stored_key),
            bytes(record.server_key),
            record.iterations,
        )
    else:
        users.pop(record.name, None)


@dataclass(frozen=True, slots=True)
class Outcome:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def alter(
    store: UserStore, deletions: list[Any], upsertions: list[Any]
) -> tuple[list[Outcome], list[bytes]]:
    """Each user's outcome (in first-seen order) and the records of what was applied."""
    order: list[str] = []
    failed: dict[str, Outcome] = {}
    seen: set[tuple[str, int]] = set()

    def fail(user: str, error: ErrorCode, message: str | None) -> None:
        failed.setdefault(user, Outcome(user, error, message))

    changes: list[tuple[str, Any]] = [("delete", d) for d in deletions] + [
        ("upsert", u) for u in upsertions
    ]
    for _, change in changes:
        name = change.name or ""
        if name not in order:
            order.append(name)
        key = (name, change.mechanism)
        if key in seen:
            fail(
                name,
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        seen.add(key)
    records: list[bytes] = []
    planned: list[tuple[str, Any]] = []
    for kind, change in changes:
        name = change.name or ""
        if not name:
            fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            continue
        mechanism = BY_TYPE.get(change.mechanism)
        if mechanism is None:
            fail(name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            continue
        if kind == "delete":
            if name not in store.scram[mechanism]:
                fail(
                    name,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
                continue
        else:
            if change.iterations < MIN_ITERATIONS:
                fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
                continue
            if change.iterations > MAX_ITERATIONS:
                fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
                continue
            if not change.salted_password:
                # Kafka takes any salt, even none; an empty salted password fails in its
                # HMAC (an empty key), which it answers as an unknown error, with no message.
                fail(name, ErrorCode.UNKNOWN_SERVER_ERROR, None)
                continue
        planned.append((kind, change))
    for kind, change in planned:
        name = change.name
        if name in failed:
            continue
        mechanism = BY_TYPE[change.mechanism]
        if kind == "delete":
            record: Any = mr.RemoveUserScramCredentialRecord(name=name, mechanism=change.mechanism)
        else:
            c = from_salted_password(
                mechanism, bytes(change.salt), bytes(change.salted_password), change.iterations
            )
            record = credential_record(name, change.mechanism, c)
        apply_record(store, record)
        records.append(mr.encode(record))
    return [failed.get(u, Outcome(u)) for u in order], records


def describe(
    store: UserStore, users: list[str] | None
) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
    """(user, error, message, [(mechanism type, iterations)]) per user asked (all if None)."""

    def infos(user: str) -> list[tuple[int, int]]:
        return [
            (MECHANISMS[m], creds[user].iterations)
            for m, creds in store.scram.items()
            if user in creds
        ]

    if users is None:
        names = sorted({u for creds in store.scram.values() for u in creds})
        return [(u, ErrorCode.NONE, None, infos(u)) for u in names]
    out = []
    duplicates = {u for u in users if users.count(u) > 1}
    done: set[str] = set()
    for user in users:
        if user in done:
            continue
        done.add(user)
        if user in duplicates:
            out.append(
                (
                    user,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                    [],
                )
            )
            continue
        found = infos(user)
        if not found:
            out.append(
                (
                    user,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to describe a user credential that does not exist",
                    [],
                )
            )
        else:
            out.append((user, ErrorCode.NONE, None, found))
    return out
