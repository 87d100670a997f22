"""Where the domain relay listens: 127.0.0.1, the local clusters' console address, and RLARK_DOMAIN_RELAY_LISTEN
(the addresses Kubernetes Pods reach the console at); a value that is not an IPv4 address is refused by name."""

from __future__ import annotations

import pytest

from clusters.runtime.local.netns import CONSOLE_ADDRESS
from domains import dataplane


def test_the_listen_addresses_add_to_loopback_and_the_console_address(monkeypatch):
    monkeypatch.delenv("RLARK_DOMAIN_RELAY_LISTEN", raising=False)
    assert dataplane.relay_listen_hosts() == ("127.0.0.1", CONSOLE_ADDRESS)
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_LISTEN", " 10.219.64.1, 10.219.65.1,127.0.0.1,")
    assert dataplane.relay_listen_hosts() == ("127.0.0.1", CONSOLE_ADDRESS, "10.219.64.1", "10.219.65.1")


@pytest.mark.parametrize("value", ["console.example.com", "10.0.0.300", "::1"])
def test_a_value_that_is_no_ipv4_address_is_named(monkeypatch, value):
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_LISTEN", f"10.0.0.1,{value}")
    with pytest.raises(ValueError, match="RLARK_DOMAIN_RELAY_LISTEN") as err:
        dataplane.relay_listen_hosts()
    assert repr(value) in str(err.value)


def test_more_than_16_addresses_are_refused(monkeypatch):
    monkeypatch.setenv("RLARK_DOMAIN_RELAY_LISTEN", ",".join(f"10.0.0.{i}" for i in range(1, 18)))
    with pytest.raises(ValueError, match="at most 16"):
        dataplane.relay_listen_hosts()
