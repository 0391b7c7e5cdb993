"""Share sessions and the share partitions they read (KIP-932), as Kafka's
SharePartitionManager and ShareSessionCache keep them on a broker.

A share session belongs to one (group, member) and lists the partitions its fetches read. A
ShareFetch at epoch 0 opens it (replacing one the member had, whose records stay acquired
until their locks expire, as in Kafka); each later ShareFetch or ShareAcknowledge must carry
the session's next epoch; epoch -1 (on ShareAcknowledge at a client's close) applies its
acknowledgements and closes the session, and the member's acquired records go back to the
group at once. So do they when the connection that opened the session closes. As in Kafka,
fetching does not ask the group coordinator whether the member belongs to the group.

A share partition is made by the first fetch of its group that reads it, starting where the
group's `share.auto.offset.reset` says (latest by default; earliest; by_duration:<ISO 8601
duration>, the first offset written since then). On a data dir (`keep`) every change of what a
restart must keep marks the partition dirty, and share_state.py writes it.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable
from typing import Any

from minicoord.protocol.errors import ErrorCode
from minicoord.server.config import Config
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.share_partitions import SharePartition

# (group id, topic id, partition)
PartitionKey = tuple[str, Any, int]
# Kafka's ShareFetchMetadata epochs: open a session, close it.
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
INT_MAX = 2**31 - 1


class SessionError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class ShareSession:
    __slots__ = ("conn", "epoch", "partitions", "turn")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        # Which partition goes first in the next fetch: they take turns.
        self.turn = 0
        self.epoch = 1  # the epoch the next request must carry
        # (topic id, partition) in the order they were added.
        self.partitions: dict[tuple[Any, int], None] = {}


class Shares:
    def __init__(
        self,
        config: Config,
        timers: TimerQueue,
        reset_of: Callable[[str], str],
        lock_ms_of: Callable[[str], int],
    ) -> None:
        self.config = config
        self.timers = timers
        # The group's share.auto.offset.reset and share.record.lock.duration.ms.
        self.reset_of = reset_of
        self.lock_ms_of = lock_ms_of
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # Share partitions whose kept state changed since it was last written (None: gone,
        # a tombstone), when state is kept (a server on a data dir: share_state.py).
        self.keep = False
        self.dirty: dict[PartitionKey, SharePartition | None] = {}

    # -- sessions -------------------------------------------------------------------------

    def session(self, group: str, member: str, epoch: int, conn: Any) -> ShareSession:
        """The session a request at `epoch` runs in (made at epoch 0), its epoch moved on;
        SessionError with Kafka's code when there is none or the epoch is not its next."""
        key = (group, member)
        if epoch == INITIAL_EPOCH:
            session = self.sessions[key] = ShareSession(conn)
            return session
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(
                ErrorCode.SHARE_SESSION_NOT_FOUND,
                f"Share session not found for group {group} and member {member}.",
            )
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise SessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"The share session epoch {epoch} does not match the expected epoch "
                f"{session.epoch}.",
            )
        session.epoch = 1 if session.epoch == INT_MAX else session.epoch + 1
        session.conn = conn
        return session

    def close(self, group: str, member: str) -> None:
        """Close the member's session: its acquired records go back to the group."""
        session = self.sessions.pop((group, member), None)
        if session is None:
            return
        for topic_id, index in session.partitions:
            sp = self.partitions.get((group, topic_id, index))
            if sp is not None:
                sp.release(member)

    def on_disconnect(self, conn: Any) -> None:
        """A connection closed: the sessions it opened close, as Kafka's
        ConnectionDisconnectListener closes them."""
        for (group, member), session in list(self.sessions.items()):
            if session.conn is conn:
                self.close(group, member)

    # -- partitions -----------------------------------------------------------------------

    def partition(self, group: str, topic: Any, index: int, plog: Any, now: int) -> SharePartition:
        key = (group, topic.topic_id, index)
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.made(key, self._start(self.reset_of(group), plog, now))
        return sp

    def made(self, key: PartitionKey, start: int) -> SharePartition:
        """A new share partition at `start`, nothing in flight (in place of any before)."""
        self._forget(self.partitions.get(key))
        sp = self.partitions[key] = SharePartition(
            key, start, self.timers, self.config.group_share_delivery_count_limit
        )
        if self.keep:
            sp.on_change = self._changed
            self.dirty[key] = sp
        return sp

    def _changed(self, sp: SharePartition) -> None:
        self.dirty[sp.key] = sp

    @staticmethod
    def _forget(sp: SharePartition | None) -> None:
        # Its locks may still run out: what they change is no longer anyone's to keep.
        if sp is not None:
            sp.on_change = None

    @staticmethod
    def _start(reset: str, plog: Any, now: int) -> int:
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            found = plog.offset_for_timestamp(now - duration_ms(reset[len("by_duration:") :]))
            return found[0] if found is not None else plog.high_watermark
        return plog.high_watermark

    def start_at(self, group: str, topic_id: Any, index: int, start: int) -> None:
        """The group's partition starts again at `start`, nothing in flight
        (AlterShareGroupOffsets, on an empty group)."""
        self.made((group, topic_id, index), start)

    def topics_of(self, group: str) -> dict[Any, list[int]]:
        """{topic id: partitions} the group has a share partition of."""
        out: dict[Any, list[int]] = {}
        for g, topic_id, index in sorted(self.partitions, key=lambda k: (str(k[1]), k[2])):
            if g == group:
                out.setdefault(topic_id, []).append(index)
        return out

    def drop(self, keep: Callable[[PartitionKey], bool]) -> None:
        """Forget the share partitions `keep` refuses (a deleted group's or topic's)."""
        for key in [k for k in self.partitions if not keep(k)]:
            self._forget(self.partitions.pop(key))
            if self.keep:
                self.dirty[key] = None

    def of_group(self, group: str) -> Iterable[SharePartition]:
        return [sp for key, sp in self.partitions.items() if key[0] == group]


_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


def duration_ms(text: str) -> int:
    """An ISO 8601 duration as Java's Duration.parse reads the common forms (PnDTnHnMn.nS);
    ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip().upper())
    if match is None or not any(match.groupdict().values()) or text.strip().upper().endswith("T"):
        raise ValueError(f"Invalid duration: {text}")
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    delta = datetime.timedelta(
        days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"]
    )
    return int(delta.total_seconds() * 1000)
