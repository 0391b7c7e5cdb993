"""SIGTERM: stop accepting, answer what is in flight, flush the log, exit 0, lose nothing."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from minicoord.clients.connection import ConnectionClosed, ProtocolClient
from minicoord.server.process import start_server_process

GROUP = "shutdown-group"
Topic = OffsetCommitRequest.OffsetCommitRequestTopic
Partition = Topic.OffsetCommitRequestPartition


def commit(offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        version=8,
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            Topic(
                name="t",
                partitions=[
                    Partition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )


@pytest.mark.parametrize("policy", ["write", "fsync", "none"])
async def test_sigterm_answers_in_flight_commits_and_loses_none(
    tmp_path: Path, policy: str
) -> None:
    server = start_server_process(
        {"log.flush.policy": policy}, [("t", 1)], data_dir=tmp_path / "data"
    )
    port = server.port
    acked: list[int] = []
    async with await ProtocolClient.connect("127.0.0.1", port) as client:

        async def one(offset: int) -> None:
            try:
                response = await client.request(commit(offset))
            except ConnectionClosed:
                return
            if response.topics[0].partitions[0].error_code == 0:
                acked.append(offset)

        tasks = [asyncio.create_task(one(i)) for i in range(1, 2001)]
        deadline = time.monotonic() + 20
        while not acked and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        assert acked, "no commit was answered before the shutdown"
        sent_at = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    returncode = await asyncio.to_thread(server.proc.wait, 30)
    assert returncode == 0, server.log
    assert time.monotonic() - sent_at < 10

    restarted = start_server_process(
        {"log.flush.policy": policy}, [("t", 1)], data_dir=tmp_path / "data", port=port
    )
    try:
        async with await ProtocolClient.connect("127.0.0.1", restarted.port) as client:
            request = OffsetFetchRequest(
                version=7,
                group_id=GROUP,
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])
                ],
                require_stable=False,
            )
            deadline = time.monotonic() + 20
            while True:
                response = await asyncio.wait_for(client.request(request), 10)
                if response.error_code == 0 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)  # the partition may still be loading
            committed = response.topics[0].partitions[0].committed_offset
    finally:
        restarted.stop()
    # Commits on one partition are applied in order: the last acknowledged one is there.
    assert committed >= max(acked)
