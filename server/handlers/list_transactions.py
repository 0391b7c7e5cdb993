"""ListTransactions (key 66), versions 0-2: the transactions this node coordinates.

minicoord serves no transactions, so the list is always empty, as a single-node Kafka's is
before any transactional producer: what remains is Kafka's handling of the filters
(KafkaApis.handleListTransactionsRequest, TransactionStateManager.listTransactionStates):
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
No ACL is checked for the request: Kafka leaves out the transactions whose id the caller may
not Describe, and there are none to leave out.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.request_log import refused

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
    return _answer(ctx, ErrorCode.NONE, unknown)


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


def _answer(ctx: RequestContext, error: ErrorCode, unknown: list[str]) -> Any:
    return SPEC.response(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[],
    )


HANDLER = Handler.for_spec(SPEC, handle)
