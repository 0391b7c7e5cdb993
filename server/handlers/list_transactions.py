"""ListTransactions (key 66), versions 0-2: the transactions this node coordinates.

Every transactional id the coordinator knows (since the server started), with its producer
id and state, filtered as Kafka filters them (KafkaApis.handleListTransactionsRequest,
TransactionStateManager.listTransactionStates): by state, producer id, v1's duration (open
longer than it) and v2's pattern (the whole id must match); with ACLs, the ids the caller
may not Describe are left out.
- a state filter that is not one of Kafka's state names (case-sensitive:
  TransactionState.fromName) is no error: it is named back in unknown_state_filters, once;
- the producer id filter and v1's duration filter are never refused (a negative duration
  means no filter, as the schema says);
- v2's transactional id pattern (KIP-1152), when neither null nor empty, must compile as a
  regular expression, else the whole answer is INVALID_REGULAR_EXPRESSION with empty lists
  (the exception goes to ListTransactionsRequest.getErrorResponse). Kafka compiles it with
  java.util.regex; here a pattern is refused only when neither Python's `re` nor RE2 compiles
  it, so the Java constructs one of them knows (\\p{L}, \\Q..\\E, possessive quantifiers)
  are not refused for want of the other.
No ACL is checked for the request itself.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.request_log import refused
from minicoord.server.security import authorize

API_KEY = 66
SPEC = SPECS[API_KEY]
# TransactionState.stateName of each of Kafka's states (transaction-coordinator module).
STATE_NAMES = frozenset(
    {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    }
)


def handle(ctx: RequestContext, request: Any) -> Any:
    pattern = request.transactional_id_pattern if ctx.version >= 2 else None
    if pattern and not _compiles(pattern):
        refused(ctx, ErrorCode.INVALID_REGULAR_EXPRESSION, f"transactional id pattern {pattern!r}")
        return _answer(ctx, ErrorCode.INVALID_REGULAR_EXPRESSION, [])
    # Kafka collects the filters into a set first: each unknown one is named once.
    unknown = [s for s in dict.fromkeys(request.state_filters) if s not in STATE_NAMES]
    states = set(request.state_filters)
    producers = set(request.producer_id_filters)
    duration = request.duration_filter if ctx.version >= 1 else -1
    matches = _matcher(pattern) if pattern else None
    now = ctx.broker.now()
    listed = []
    for txn in ctx.broker.transactions.txns.values():
        if (
            (producers and txn.producer_id not in producers)
            or (states and txn.state not in states)
            or (duration >= 0 and now - txn.start_ms <= duration)
            or (matches is not None and not matches(txn.transactional_id))
            or not authorize.allowed(
                ctx, authorize.DESCRIBE, authorize.TRANSACTIONAL_ID, txn.transactional_id
            )
        ):
            continue
        listed.append(
            SPEC.response.TransactionState(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state,
            )
        )
    return _answer(ctx, ErrorCode.NONE, unknown, listed)


def _matcher(pattern: str) -> Callable[[str], bool]:
    """Whole-id matching, as Java's Matcher.matches()."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = re.compile(pattern)
        return lambda tid: compiled.fullmatch(tid) is not None
    except (re.error, RecursionError, OverflowError):
        from minicoord.server.coordinator.consumer.targets import compile_regex

        regex = compile_regex(pattern)
        return lambda tid: regex.fullmatch(tid) is not None


def _compiles(pattern: str) -> bool:
    try:
        with warnings.catch_warnings():
            # Python warns of syntax it may read differently one day (`[[`, `&&`): still valid.
            warnings.simplefilter("ignore")
            re.compile(pattern)
        return True
    except (re.error, RecursionError, OverflowError):
        pass
    from minicoord.server.coordinator.consumer.targets import InvalidRegex, compile_regex

    try:
        compile_regex(pattern)
    except InvalidRegex:
        return False
    return True


def _answer(
    ctx: RequestContext, error: ErrorCode, unknown: list[str], listed: list[Any] | None = None
) -> Any:
    return SPEC.response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=listed or [],
    )


HANDLER = Handler.for_spec(SPEC, handle)
