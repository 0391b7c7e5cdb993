"""`minicoord doctor` against TLS listeners: with `security.protocol=SSL` or `SASL_SSL` it
speaks TLS with the client's `ssl.*` settings, as librdkafka does, and plaintext only to tell
a listener that does not speak TLS."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from minicoord.server.cli import main


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["doctor", "--timeout", "5", *args])
    out, err = capsys.readouterr()
    return code, out, err


def verdict(out: str, subject: str) -> list[str]:
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == subject:
            return cells[1:]
    raise AssertionError(f"no row {subject!r} in:\n{out}")


def test_doctor_speaks_tls_to_tls_listeners(
    capsys: pytest.CaptureFixture[str], secure: Any, certs: Any
) -> None:
    ca = f"ssl.ca.location={certs.ca}"
    sasl_ssl = secure.address_of("SASL_SSL")
    code, out, _ = doctor(
        capsys, sasl_ssl, "-X", "security.protocol=SASL_SSL", "-X", ca, "-X", "sasl.mechanism=PLAIN"
    )
    assert code == 0, out
    assert verdict(out, "security.protocol=SASL_SSL") == [
        "ok", "the listener answered Kafka over TLS and advertises SASL (no credentials checked)"
    ]  # fmt: skip
    assert verdict(out, "sasl.mechanism=PLAIN")[0] == "ok"

    # The SSL listener wants a client certificate: with one, it is served.
    client_cert = ["-X", f"ssl.certificate.location={certs.client_cert}"]
    client_cert += ["-X", f"ssl.key.location={certs.client_key}"]
    ssl_port = secure.address_of("SSL")
    code, out, _ = doctor(capsys, ssl_port, "-X", "security.protocol=SSL", "-X", ca, *client_cert)
    assert code == 0, out
    assert verdict(out, "security.protocol=SSL")[0] == "ok"
    # Metadata, asked over TLS, names the listener the doctor came in through.
    args = [ssl_port, "-X", "security.protocol=SSL", "-X", ca, *client_cert]
    report = json.loads(doctor(capsys, "--json", *args)[1])
    host, port = ssl_port.split(":")
    assert [(b["host"], b["port"], b["reachable"]) for b in report["brokers"]] == [
        (host, int(port), True)
    ]
    assert "tls_error" not in report and "unanswered" not in report
    # Without one, no answer in TLS or in plaintext: exit 3, saying what it may want.
    code, out, _ = doctor(capsys, ssl_port, "-X", "security.protocol=SSL", "-X", ca)
    assert code == 3 and "wanting a client certificate (ssl.certificate.location)" in out, out

    # TLS asked of the PLAINTEXT listener: it answers plaintext, so TLS cannot work there.
    plain = secure.address_of("PLAINTEXT")
    code, out, _ = doctor(capsys, plain, "-X", "security.protocol=SSL", "-X", ca)
    assert code == 1
    (state, why) = verdict(out, "security.protocol=SSL")
    assert state == "CANNOT WORK" and "does not speak TLS" in why and "(TLS)" in why

    # No CA given: the listener's certificate is not trusted. That is the settings' fault,
    # not a missing server: exit 1, saying so.
    sasl = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=PLAIN"]
    code, out, _ = doctor(capsys, sasl_ssl, "--timeout", "0.5", *sasl)
    assert code == 1, out
    assert "CERTIFICATE_VERIFY_FAILED" in out and "ssl.ca.location names the CA" in out, out

    # A CA file that is not there is a malformed argument.
    code, _, err = doctor(capsys, plain, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=/no")
    assert code == 2 and "the ssl.* settings cannot be used" in err
