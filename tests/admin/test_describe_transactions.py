"""DescribeTransactions (key 65, KIP-664): an id no producer used is TRANSACTIONAL_ID_NOT_FOUND,
as Kafka's coordinator answers it; an empty id INVALID_REQUEST; no Describe on the id
TRANSACTIONAL_ID_AUTHORIZATION_FAILED first (KafkaApis.handleDescribeTransactionsRequest,
TransactionCoordinator.handleDescribeTransactions). Raw requests for the answers, and what a
stock admin client (kafka-python's describe_transactions, which looks the transaction
coordinator up first) gets. Ids in use are described in tests/clients/test_transactions.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from authzkit import authorized_client
from kafka import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError
from kafka.protocol.admin import DescribeTransactionsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

NOT_FOUND = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
# What an error leaves in the other fields: the schema's defaults, as Kafka leaves them.
DEFAULTS = ("", 0, 0, 0, 0, [])


async def describe(client: ProtocolClient, *ids: str) -> list[tuple[object, ...]]:
    """[(id, error code, state, timeout, start time, pid, epoch, topics)] in answer order."""
    request = DescribeTransactionsRequest(version=0, transactional_ids=list(ids))
    answer = await asyncio.wait_for(client.request(request, 0), 5)
    return [
        (
            t.transactional_id,
            t.error_code,
            t.transaction_state,
            t.transaction_timeout_ms,
            t.transaction_start_time_ms,
            t.producer_id,
            t.producer_epoch,
            list(t.topics),
        )
        for t in answer.transaction_states
    ]


async def test_every_id_is_unknown_and_an_empty_one_invalid(raw_client: ProtocolClient) -> None:
    assert await describe(raw_client, "tx-a", "", "tx-a", "tx-b") == [
        ("tx-a", NOT_FOUND, *DEFAULTS),
        ("", ErrorCode.INVALID_REQUEST, *DEFAULTS),
        ("tx-a", NOT_FOUND, *DEFAULTS),
        ("tx-b", NOT_FOUND, *DEFAULTS),
    ]
    assert await describe(raw_client) == []


async def test_an_idempotent_producers_id_is_no_transaction(raw_client: ProtocolClient) -> None:
    # InitProducerId without a transactional id makes no transaction state to describe.
    from kafka.protocol.producer import InitProducerIdRequest

    init = InitProducerIdRequest(
        version=4,
        transactional_id=None,
        transaction_timeout_ms=-1,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert (await raw_client.request(init, 4)).error_code == 0
    assert await describe(raw_client, "0") == [("0", NOT_FOUND, *DEFAULTS)]


@pytest.fixture
async def acl_client(request: pytest.FixtureRequest) -> AsyncIterator[ProtocolClient]:
    async with authorized_client(request.param) as client:
        yield client


@pytest.mark.parametrize(
    ("acl_client", "empty"),
    [
        (("allow User:ANONYMOUS Describe transactional_id:tx- prefixed",), DENIED),
        # Write implies Describe, as in Kafka's authorizer.
        (("allow User:ANONYMOUS Write transactional_id:tx- prefixed",), DENIED),
        # The wildcard covers the empty id too, which is then INVALID_REQUEST.
        (
            (
                "allow User:ANONYMOUS Describe transactional_id:*",
                "deny User:ANONYMOUS Describe transactional_id:other",
            ),
            ErrorCode.INVALID_REQUEST,
        ),
    ],
    ids=["describe-prefixed", "write-implies-it", "wildcard-and-deny"],
    indirect=["acl_client"],
)
async def test_describe_on_the_id_is_needed_first(
    acl_client: ProtocolClient, empty: ErrorCode
) -> None:
    # Authorization comes before the empty id's INVALID_REQUEST.
    assert await describe(acl_client, "tx-1", "other", "") == [
        ("tx-1", NOT_FOUND, *DEFAULTS),
        ("other", DENIED, *DEFAULTS),
        ("", empty, *DEFAULTS),
    ]


@pytest.mark.parametrize(
    "acl_client", [("allow User:ANONYMOUS Describe cluster",)], ids=["cluster"], indirect=True
)
async def test_nothing_on_the_cluster_stands_for_it(acl_client: ProtocolClient) -> None:
    assert await describe(acl_client, "tx-1") == [("tx-1", DENIED, *DEFAULTS)]


def test_a_stock_admin_client_finds_the_coordinator_and_no_such_id() -> None:
    # kafka-python (as Java's Admin) asks FindCoordinator for the transaction coordinator
    # first, then DescribeTransactions there: an unused id raises as against Kafka.
    with running() as s:
        client = KafkaAdminClient(bootstrap_servers=s.bootstrap, client_id="describe-txns")
        try:
            assert client.describe_transactions([]) == {}
            with pytest.raises(TransactionalIdNotFoundError, match="'tx-1'"):
                client.describe_transactions(["tx-1"])
        finally:
            client.close()
