"""One partition's transactions: which are open, which were aborted, and the last stable offset.

Kafka keeps these per partition (ProducerStateManager's ongoing transactions, the
transaction index of each segment): a producer's first transactional batch opens its
transaction at that batch's offset; the marker the coordinator writes ends it. The last
stable offset (LSO) is the first offset of the oldest open transaction, or the high
watermark when none is open; a read_committed Fetch reads only below it and is told which
aborted transactions overlap what it read, so the client can drop their records.

Rebuilt when a log is opened from the batch headers (`load`) and the markers' types
(`resolve`), as Kafka rebuilds its producer state and transaction index from the log.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

from minicoord.storage.batch import CONTROL, TRANSACTIONAL, BatchInfo

if TYPE_CHECKING:
    from minicoord.storage.partition_log import PartitionLog
    from minicoord.storage.segment import Segment


class PartitionTxns:
    __slots__ = ("_loaded_markers", "aborted", "open")

    def __init__(self) -> None:
        # producer id -> the first offset of its open transaction here.
        self.open: dict[int, int] = {}
        # (last offset, producer id, first offset) of each aborted transaction, by last
        # offset (the marker's): what a Fetch from some offset on must be told about.
        self.aborted: list[tuple[int, int, int]] = []
        # Markers seen while loading, their types still to read: (offset, producer id).
        self._loaded_markers: list[tuple[int, int]] | None = None

    def first_unstable(self, high_watermark: int) -> int:
        """The last stable offset."""
        if not self.open:
            return high_watermark
        return min(min(self.open.values()), high_watermark)

    def on_append(self, info: BatchInfo, base_offset: int) -> None:
        """A batch accepted into the log; opens its producer's transaction if transactional."""
        if info.attributes & TRANSACTIONAL and not info.attributes & CONTROL:
            self.open.setdefault(info.producer_id, base_offset)

    def on_marker(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        """The marker at `marker_offset` ended the producer's transaction here."""
        first = self.open.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append((marker_offset, producer_id, first))

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions that overlap [start, end),
        as Kafka's collectAbortedTxns answers a read_committed Fetch."""
        out = []
        for i in range(bisect_left(self.aborted, (start,)), len(self.aborted)):
            _last, pid, first = self.aborted[i]
            if first < end:
                out.append((pid, first))
        return out

    def aborted_ranges(self) -> list[tuple[int, int, int]]:
        """(producer id, first offset, last offset) of each aborted transaction, as the
        cleaner drops their records."""
        return [(pid, first, last) for last, pid, first in self.aborted]

    def stable(self, segments: Sequence[Segment], high_watermark: int) -> list[Segment]:
        """The segments wholly below the last stable offset, which a cleaning may take (an
        open transaction's records may yet be aborted: Kafka's first uncleanable offset)."""
        if not self.open:
            return list(segments)
        lso = self.first_unstable(high_watermark)
        return [s for s in segments if s.next_offset <= lso]

    def forget_before(self, log_start_offset: int) -> None:
        """Aborted transactions wholly before the log start no Fetch can reach."""
        cut = bisect_left(self.aborted, (log_start_offset,))
        if cut:
            del self.aborted[:cut]

    def forget_aborted(self, marker_offsets: Sequence[int]) -> None:
        """Aborted transactions whose markers the cleaner dropped, their records gone: no
        Fetch needs to be told of them."""
        if marker_offsets:
            gone = set(marker_offsets)
            self.aborted = [entry for entry in self.aborted if entry[0] not in gone]

    # -- rebuilding from the log ----------------------------------------------------------

    def load(self, info: BatchInfo) -> None:
        """A batch header found while the log is opened (in offset order)."""
        if not info.attributes & TRANSACTIONAL:
            return
        if info.attributes & CONTROL:
            if self._loaded_markers is None:
                self._loaded_markers = []
            self._loaded_markers.append((info.base_offset, info.producer_id))
            # Ended here: a later batch of the producer opens its next transaction. Whether
            # it aborted is read in `resolve`; until then the marker ends it as a commit.
            first = self.open.pop(info.producer_id, None)
            if first is not None:
                self.aborted.append((info.base_offset, info.producer_id, -1 - first))
            return
        self.open.setdefault(info.producer_id, info.base_offset)

    def markers_to_resolve(self) -> list[tuple[int, int]]:
        return self._loaded_markers or []

    def resolve_from(self, plog: PartitionLog) -> None:
        """`resolve` with the markers' types read from the opened log."""
        markers = self.markers_to_resolve()
        if markers:
            from minicoord.storage.control_batch import COMMIT, marker_type

            self.resolve(
                {offset: marker_type(plog.read(offset, 1)) == COMMIT for offset, _ in markers}
            )

    def resolve(self, kinds: dict[int, bool]) -> None:
        """The markers' types, by offset (True: commit), once the log is open: the committed
        transactions found by `load` leave the aborted list, the aborted ones stay."""
        kept = []
        for last, pid, encoded in self.aborted:
            if encoded >= 0:
                kept.append((last, pid, encoded))
            elif not kinds.get(last, False):
                kept.append((last, pid, -1 - encoded))
        self.aborted = kept
        self._loaded_markers = None
