"""`early_listen.packed_ip` against `ipaddress`, the module it stands in for at start."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st
from minicoord.server.early_listen import packed_ip

ADDRESSES = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6))
TEXT = st.text(alphabet="0123456789abcdefABCDEF:.%x ", max_size=45)


@given(ADDRESSES, st.sampled_from(["", "%eth0", "%1"]))
def test_every_ip_literal_packs_as_ipaddress_packs_it(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, zone: str
) -> None:
    if address.version == 4:
        assert packed_ip(str(address)) == address.packed
        assert packed_ip(str(address) + zone) is None or not zone
    else:
        assert packed_ip(str(address) + zone) == address.packed
        assert packed_ip(address.exploded) == address.packed


@given(TEXT)
def test_other_text_is_an_address_only_where_ipaddress_reads_one(text: str) -> None:
    try:
        expected: bytes | None = ipaddress.ip_address(text).packed
    except ValueError:
        expected = None
    got = packed_ip(text)
    if expected is not None:
        assert got == expected
    elif got is not None:
        # The socket module is laxer only about an IPv6 zone (ipaddress wants a non-empty one).
        assert "%" in text and got == ipaddress.ip_address(text.partition("%")[0]).packed


def test_names_and_the_empty_host_are_not_addresses() -> None:
    assert [packed_ip(h) for h in ("", "localhost", "1.2.3", "01.2.3.4", "::1\0")] == [None] * 5
    assert not any(packed_ip("0.0.0.0") or b"") and not any(packed_ip("::") or b"")
