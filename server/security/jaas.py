"""Users from Kafka's JAAS config strings.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

`user_NAME="PASSWORD"` options define users (Kafka's PlainLoginModule reads them; minicoord
also reads them from ScramLoginModule, where Kafka would want kafka-configs instead). The
OAUTHBEARER login module's `unsecuredValidator*` options configure the unsecured validator.
"""

from __future__ import annotations

from dataclasses import field

from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.config import ConfigError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def users(self) -> dict[str, str]:
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def parse(text: str) -> list[LoginModule]:
    """Every login module of a JAAS string (ConfigError naming the position, never a value)."""
    modules = []
    pos, n = 0, len(text)

    def skip() -> None:
        nonlocal pos
        while pos < n and text[pos].isspace():
            pos += 1

    def word() -> str:
        nonlocal pos
        start = pos
        while pos < n and not text[pos].isspace() and text[pos] not in '=;"':
            pos += 1
        return text[start:pos]

    while True:
        skip()
        if pos >= n:
            break
        name = word()
        skip()
        flag = word()
        if not name or flag not in FLAGS:
            raise ConfigError(
                f"sasl.jaas.config: expected '<LoginModule class> required ...' at {pos}"
            )
        module = LoginModule(name, flag)
        while True:
            skip()
            if pos >= n:
                raise ConfigError("sasl.jaas.config: a login module must end with ';'")
            if text[pos] == ";":
                pos += 1
                break
            key = word()
            skip()
            if not key or pos >= n or text[pos] != "=":
                raise ConfigError(f"sasl.jaas.config: expected key=value at {pos}")
            pos += 1
            skip()
            if pos < n and text[pos] == '"':
                end = text.find('"', pos + 1)
                if end < 0:
                    raise ConfigError(f"sasl.jaas.config: unterminated quote at {pos}")
                value = text[pos + 1 : end]
                pos = end + 1
            else:
                value = word()
            module.options[key] = value
        modules.append(module)
    if not modules:
        raise ConfigError("sasl.jaas.config names no login module")
    return modules
