"""The cluster's features (KIP-584): the levels this node supports, the levels the cluster is
finalized at, and UpdateFeatures' rules for changing them (Kafka's FeatureControlManager).

ApiVersions reports them as a Kafka 4.0 node does: `metadata.version` supported from 3.3-IV3
(level 7) to 4.0-IV3 (25) and finalized at 4.0-IV3, the level whose API versions these are;
`group.version` supported to 1 and finalized at 1 (KIP-848's consumer protocol on);
`share.version` supported to 1 and finalized at 1 (KIP-932's share groups on, as a new Kafka 4.2
cluster has them, though Kafka ties that level to a later metadata version than 4.0's);
`kraft.version` supported 0-1 and not finalized (level 0: a static quorum, the shape
DescribeQuorum answers in). `transaction.version` is not listed: only its level 0 (the classic
transaction protocol) is served, and clients read its absence as that.

`group.version` can be changed: at 0 the consumer protocol is off (ConsumerGroupHeartbeat
and ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as Kafka's do), at 1 on again.
`share.version` likewise turns the share-group requests off and on.
`kraft.version` can be moved to 1 and back, as FeatureControlManager checks any feature, and
that changes nothing else here (one voter either way). Each
change is a FeatureLevelRecord in the cluster metadata log, so it outlives a restart. The
metadata version stays at its top: moving it to a level it supports is accepted and changes
nothing, a downgrade is refused as Kafka refuses one that might lose metadata. The features'
epoch is the metadata log's end offset (Broker.features_epoch), as Kafka's is its latest
offset: it moves with every metadata change.
"""

from __future__ import annotations

from collections.abc import Iterable

from minicoord.protocol import metadata_records as mr

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
KRAFT_VERSION = "kraft.version"
SHARE_VERSION = "share.version"
# Each feature this node supports, with its (lowest, highest) level: Kafka 4.0's
# BrokerFeatures.defaultSupportedFeatures, but transaction.version.
SUPPORTED = {
    METADATA_VERSION: (7, 25),
    KRAFT_VERSION: (0, 1),
    GROUP_VERSION: (0, 1),
    SHARE_VERSION: (0, 1),
}
# The levels a new cluster is finalized at (a 4.0 cluster formatted at its release's, with
# share groups on as in 4.2).
INITIAL = {METADATA_VERSION: 25, GROUP_VERSION: 1, SHARE_VERSION: 1}
# UpdateFeatures' upgrade types (FeatureUpdate.UpgradeType).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


class Features:
    """The finalized levels, changed by UpdateFeatures and by FeatureLevelRecords read back."""

    __slots__ = ("levels",)

    def __init__(self) -> None:
        self.levels = dict(INITIAL)

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def finalized(self) -> dict[str, int]:
        """The features finalized above level 0, by name."""
        return {name: level for name, level in self.levels.items() if level > 0}

    def refusal(self, updates: Iterable[tuple[str, int, int]], node_id: int) -> str | None:
        """Why UpdateFeatures refuses these (name, level, upgrade type) updates, in Kafka's
        words (the first one wrong refuses them all); None if they may all be made."""
        for name, level, upgrade_type in updates:
            problem = self._problem(name, level, upgrade_type, node_id)
            if problem is not None:
                return problem
        return None

    def _problem(self, name: str, level: int, upgrade_type: int, node_id: int) -> str | None:
        invalid = f"Invalid update version {level} for feature {name}."
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return f"{invalid} The controller does not support the given upgrade type."
        if level < 0:
            return f"{invalid} A feature version cannot be less than 0."
        low, high = SUPPORTED.get(name, (0, 0))
        if not low <= level <= high:
            # QuorumFeatures.reasonNotSupported, VersionRange's way of printing a range.
            what = f"Local controller {node_id}"
            if high == 0:
                return f"{invalid} {what} does not support this feature."
            versions = low if low == high else f"{low}-{high}"
            return f"{invalid} {what} only supports versions {versions}"
        current = self.level(name)
        if level < current and upgrade_type == UPGRADE:
            return (
                f"{invalid} Can't downgrade the version of this feature without setting the "
                "upgrade type to either safe or unsafe downgrade."
            )
        if level > current and upgrade_type != UPGRADE:
            return f"{invalid} Can't downgrade to a newer version."
        if name == METADATA_VERSION and level < current:
            # FeatureControlManager.updateMetadataVersion: every lower version's metadata
            # differs from the top's here.
            if upgrade_type == UNSAFE_DOWNGRADE:
                why = "Unsafe metadata downgrade is not supported in this version."
            else:
                why = (
                    "Refusing to perform the requested downgrade because it might delete "
                    "metadata information."
                )
            return f"Invalid metadata.version {level}. {why}"
        return None

    def records(self, updates: Iterable[tuple[str, int, int]]) -> list[bytes]:
        """The FeatureLevelRecords of accepted updates, one per feature named."""
        return [
            mr.encode(mr.FeatureLevelRecord(name=name, feature_level=level))
            for name, level, _ in updates
        ]

    def apply(self, record: mr.FeatureLevelRecord) -> None:
        """A FeatureLevelRecord of the metadata log (new or read back)."""
        if record.feature_level > 0 or record.name == METADATA_VERSION:
            self.levels[record.name] = record.feature_level
        else:
            self.levels.pop(record.name, None)

    def snapshot(self) -> list[bytes]:
        """The records that bring a new cluster's levels to these (metadata_snapshot.py)."""
        return [
            mr.encode(mr.FeatureLevelRecord(name=name, feature_level=self.level(name)))
            for name in sorted(set(INITIAL) | set(self.levels))
            if self.level(name) != INITIAL.get(name, 0)
        ]
