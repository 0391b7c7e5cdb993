"""A member of a classic group, as the coordinator sees it."""

from __future__ import annotations

import sys

from minicoord.server.coordinator.results import Ticket

# How long a brand-new member blocked in its first JoinGroup is kept without heartbeats
# (Kafka's NewMemberJoinTimeoutMs): a member that never heard back cannot heartbeat.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

Protocols = tuple[tuple[str, bytes], ...]

# Members of a group nearly always send the same protocols with the same metadata (a
# consumer's subscription): share one copy instead of keeping thousands. Bounded by clearing,
# which only forgets (members keep the copies they hold): at 4,096 entries (a group's worth
# of sharing each), or once the metadata kept reaches 4 MiB, so that what the table holds
# for groups long gone (a server that sees new groups all day), or for JoinGroups with
# large, ever-different subscriptions, stays a few MB.
_INTERNED: dict[Protocols, tuple[Protocols, frozenset[str]]] = {}
_INTERN_LIMIT = 4096
_INTERNED_BYTES_LIMIT = 4 << 20
_interned_bytes = 0


# Timeouts: the members of an application all send the same one or two values. A pair of
# ints of a timeout's size is three objects of its own per member unless shared.
_TIMEOUTS: dict[tuple[int, int], tuple[int, int]] = {}


def _shared_timeouts(rebalance_timeout_ms: int, session_timeout_ms: int) -> tuple[int, int]:
    pair = (rebalance_timeout_ms, session_timeout_ms)
    found = _TIMEOUTS.get(pair)
    if found is None:
        if len(_TIMEOUTS) >= _INTERN_LIMIT:
            _TIMEOUTS.clear()
        found = _TIMEOUTS[pair] = pair
    return found


def intern_protocols(
    protocols: list[tuple[str, bytes]] | Protocols,
) -> tuple[Protocols, frozenset[str]]:
    global _interned_bytes
    key = tuple(protocols)
    found = _INTERNED.get(key)
    if found is None:
        size = sum(len(metadata) for _, metadata in key)
        if len(_INTERNED) >= _INTERN_LIMIT or _interned_bytes + size > _INTERNED_BYTES_LIMIT:
            _INTERNED.clear()
            _interned_bytes = 0
        _interned_bytes += size
        found = _INTERNED[key] = (key, frozenset(name for name, _ in key))
    return found


class Member:
    """Slots by hand rather than a dataclass: the timeouts and the protocols are each one
    shared pair, so that ten thousand members hold 12 slots each, not 14. A member keeps no
    protocol type: it is its group's (a JoinGroup that names another is refused)."""

    __slots__ = (
        "_protocols",
        "_timeouts",
        "assignment",
        "client_host",
        "client_id",
        "group_instance_id",
        "join_ticket",
        "joined_at",
        "last_heartbeat",
        "member_id",
        "supports_skip_assignment",
        "sync_ticket",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: list[tuple[str, bytes]] | Protocols,
        last_heartbeat: int = 0,
        assignment: bytes = b"",
        join_ticket: Ticket = None,
        sync_ticket: Ticket = None,
        # Answer to a JoinGroup v9+: the leader may be told to skip assignment.
        supports_skip_assignment: bool = False,
        # When a new member first joined; None once it is not new (its first generation
        # formed, or it took a static member's place).
        joined_at: int | None = None,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        # Shared with every member (and connection) that has the same: thousands of members
        # of one application hold one copy, not one each.
        self.client_id = sys.intern(client_id)
        self.client_host = client_host
        self._timeouts = _shared_timeouts(rebalance_timeout_ms, session_timeout_ms)
        # (name, metadata) in the member's order of preference, and their names.
        self._protocols = intern_protocols(protocols)
        self.last_heartbeat = last_heartbeat
        self.assignment = assignment
        self.join_ticket = join_ticket
        self.sync_ticket = sync_ticket
        self.supports_skip_assignment = supports_skip_assignment
        self.joined_at = joined_at

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"

    @property
    def rebalance_timeout_ms(self) -> int:
        return self._timeouts[0]

    @property
    def session_timeout_ms(self) -> int:
        return self._timeouts[1]

    @property
    def protocols(self) -> Protocols:
        return self._protocols[0]

    @property
    def protocol_names(self) -> frozenset[str]:
        return self._protocols[1]

    @property
    def awaiting_join(self) -> bool:
        return self.join_ticket is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_ticket is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]] | Protocols) -> bool:
        """Same protocols, metadata and order: a rejoin that changes nothing."""
        return self.protocols == tuple(protocols)

    def update_protocols(self, protocols: list[tuple[str, bytes]] | Protocols) -> None:
        self._protocols = intern_protocols(protocols)

    def set_timeouts(self, rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self._timeouts = _shared_timeouts(rebalance_timeout_ms, session_timeout_ms)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")

    def should_keep_alive(self, now: int) -> bool:
        """Whether a lapsed session deadline is excused (Kafka's MemberMetadata.shouldKeepAlive).

        A member blocked in JoinGroup or SyncGroup cannot heartbeat, so it is not expired while
        it waits; a brand-new member only up to NEW_MEMBER_JOIN_TIMEOUT_MS.
        """
        if self.awaiting_join:
            joined_at = self.joined_at
            return joined_at is None or joined_at + NEW_MEMBER_JOIN_TIMEOUT_MS > now
        if self.awaiting_sync:
            return True
        return self.last_heartbeat + self.session_timeout_ms > now

    def next_session_check(self, now: int) -> int:
        """When a kept-alive member's session should be looked at again."""
        joined_at = self.joined_at
        if self.awaiting_join and joined_at is not None:
            return min(now + self.session_timeout_ms, joined_at + NEW_MEMBER_JOIN_TIMEOUT_MS)
        if self.awaiting_join or self.awaiting_sync:
            return now + self.session_timeout_ms
        return self.last_heartbeat + self.session_timeout_ms
