"""ExpireDelegationToken (key 40), versions 1-2, which brings a token's expiry in: refused as a
Kafka broker without `delegation.token.secret.key` refuses it (security/delegation_tokens.py).
v2 is flexible.
"""

from __future__ import annotations

from minicoord.protocol.apis import SPECS
from minicoord.server.handlers.base import Handler
from minicoord.server.security.delegation_tokens import expiry_change

API_KEY = 40

HANDLER = Handler.for_spec(SPECS[API_KEY], expiry_change)
