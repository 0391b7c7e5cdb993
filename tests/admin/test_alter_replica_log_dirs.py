"""AlterReplicaLogDirs (key 34) through a stock admin client (kafka-python's
alter_replica_log_dirs), as Kafka's ReplicaManager answers on a node with one log directory:
a move into it is NONE with nothing to do, into another path LOG_DIR_NOT_FOUND, a partition
the node does not hold REPLICA_NOT_AVAILABLE."""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaAdminClient
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
from kafka.structs import TopicPartitionReplica
from minicoord.testing.embedded import running


def test_moves_into_the_one_directory_and_elsewhere(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running(data_dir=data_dir, topics=[("t", 2)]) as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            # The directory as DescribeLogDirs names it, as a tool moving replicas reads it.
            [described] = admin.describe_log_dirs()
            [directory] = described["log_dirs"]
            own = directory["log_dir"]
            assert own == str(data_dir.resolve())
            moved = admin.alter_replica_log_dirs(
                {
                    TopicPartitionReplica("t", 0, 0): own,
                    TopicPartitionReplica("t", 1, 0): str(tmp_path / "elsewhere"),
                    TopicPartitionReplica("t", 5, 0): own,
                    TopicPartitionReplica("nosuch", 0, 0): own,
                }
            )
        finally:
            admin.close()
    assert moved == {
        TopicPartitionReplica("t", 0, 0): NoError,
        TopicPartitionReplica("t", 1, 0): LogDirNotFoundError,
        TopicPartitionReplica("t", 5, 0): ReplicaNotAvailableError,
        TopicPartitionReplica("nosuch", 0, 0): ReplicaNotAvailableError,
    }


def test_an_in_memory_node_names_its_directory_as_describe_log_dirs_does() -> None:
    with running(topics=[("t", 1)]) as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            moved = admin.alter_replica_log_dirs({TopicPartitionReplica("t", 0, 0): "(in memory)"})
        finally:
            admin.close()
    assert moved == {TopicPartitionReplica("t", 0, 0): NoError}
