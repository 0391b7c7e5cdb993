"""ListTransactions (key 66, KIP-664; v1 KIP-994, v2 KIP-1152) on a server no transactional
producer has used: the list is empty, as a single-node Kafka's is then; the filters are
handled as Kafka's TransactionStateManager.listTransactionStates handles them (listing
transactions in use: tests/clients/test_transactions.py and tests/unit). A stock admin client
(kafka-python's list_transactions) over TCP, every version with the raw client, and no
refusal with ACLs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from authzkit import authorized_client
from kafka import KafkaAdminClient
from kafka.errors import BrokerResponseError
from kafka.protocol.admin import ListTransactionsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running

INVALID_REGEX = ErrorCode.INVALID_REGULAR_EXPRESSION
KAFKA_STATES = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
]


async def list_txns(
    client: ProtocolClient,
    version: int,
    states: list[str] | None = None,
    pids: list[int] | None = None,
    duration: int = -1,
    pattern: str | None = None,
) -> tuple[int, list[str], list[object]]:
    """(error code, unknown state filters, transactions) of a ListTransactions."""
    request = ListTransactionsRequest(
        version=version,
        state_filters=states or [],
        producer_id_filters=pids or [],
        duration_filter=duration,
        transactional_id_pattern=pattern,
    )
    answer = await asyncio.wait_for(client.request(request, version), 5)
    return answer.error_code, list(answer.unknown_state_filters), list(answer.transaction_states)


def test_a_stock_admin_client_lists_no_transactions() -> None:
    with running(topics=[("orders", 1)]) as s:
        client = KafkaAdminClient(bootstrap_servers=s.bootstrap, client_id="list-transactions")
        try:
            assert client.list_transactions() == {0: []}
            assert client.list_transactions(
                state_filters=["Ongoing", "PrepareCommit"],
                producer_id_filters=[1, 2],
                duration_filter_ms=60_000,
                transactional_id_pattern="orders-.*",
            ) == {0: []}
            # kafka-python 3.0 does not know error 128 by name; its code is what Kafka sends.
            with pytest.raises(BrokerResponseError) as refused:
                client.list_transactions(transactional_id_pattern="orders-(")
            assert refused.value.errno == INVALID_REGEX
        finally:
            client.close()


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_every_version_answers_an_empty_list(
    raw_client: ProtocolClient, version: int
) -> None:
    assert await list_txns(raw_client, version) == (0, [], [])
    assert await list_txns(raw_client, version, KAFKA_STATES, [0, 1, 2**40]) == (0, [], [])


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_an_unknown_state_filter_is_named_back_once_not_refused(
    raw_client: ProtocolClient, version: int
) -> None:
    # Kafka's state names are case-sensitive (TransactionState.fromName).
    states = ["ongoing", "Ongoing", "Finished", "ongoing", "COMPLETE_COMMIT", ""]
    assert await list_txns(raw_client, version, states) == (
        0,
        ["ongoing", "Finished", "COMPLETE_COMMIT", ""],
        [],
    )


@pytest.mark.parametrize("duration", [-(2**63), -5, -1, 0, 1, 2**63 - 1])
async def test_no_duration_filter_is_refused(raw_client: ProtocolClient, duration: int) -> None:
    # Negative is "no filter" (the schema's words); KafkaApis checks nothing.
    assert await list_txns(raw_client, 1, duration=duration) == (0, [], [])
    assert await list_txns(raw_client, 2, ["Nope"], duration=duration) == (0, ["Nope"], [])


@pytest.mark.parametrize(
    "pattern",
    [None, "", "tx-.*", "^a|b$", "a*+", r"\p{L}+", r"\Q.*\E", "(?<name>x)", "[a-z&&[^e]]"],
)
async def test_a_pattern_that_compiles_is_taken(raw_client: ProtocolClient, pattern: str) -> None:
    # Java regex syntax (possessive quantifiers, Unicode classes, quoting, named groups).
    assert await list_txns(raw_client, 2, ["x"], pattern=pattern) == (0, ["x"], [])


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "?", "a{2,1}", "\\"])
async def test_a_pattern_that_does_not_compile_fails_the_request(
    raw_client: ProtocolClient, pattern: str
) -> None:
    # The coordinator throws InvalidRegularExpression; getErrorResponse keeps only its code,
    # so the unknown state filters found before it are not named.
    assert await list_txns(raw_client, 2, ["x"], pattern=pattern) == (INVALID_REGEX, [], [])


async def test_v0_and_v1_carry_no_pattern(raw_client: ProtocolClient) -> None:
    # The field is not on the wire below v2: kafka-python drops it, nothing is refused.
    assert await list_txns(raw_client, 1, pattern="(") == (0, [], [])
    assert await list_txns(raw_client, 0, pattern="(") == (0, [], [])


@pytest.fixture
async def denied_client() -> AsyncIterator[ProtocolClient]:
    async with authorized_client(()) as client:
        yield client


async def test_with_acls_nothing_is_refused(denied_client: ProtocolClient) -> None:
    # Kafka checks Describe on each listed transactional id only, to leave it out.
    assert await list_txns(denied_client, 2, ["Nope"], pattern="a") == (0, ["Nope"], [])
    assert await list_txns(denied_client, 2, pattern="(") == (INVALID_REGEX, [], [])
