"""Hosts and ports as settings give them: a host alone (name, IPv4, IPv6), each port in range."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.errors import ConfigError
from rlctl.domain.network_address import check_host, check_port

WHERE = dict(where="robot.ip_address", what="the robot", example="192.168.1.42",
             port_setting="robot.sdk_port")  # fmt: skip


@pytest.mark.parametrize(
    "host", ["192.168.1.42", "reachy.local", "localhost", "fe80::1", "[fe80::1]", "::1"]
)
def test_a_host_name_or_address_is_taken(host):
    check_host(host, **WHERE)


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("", "ip_address must name the robot"),
        ("  ", "ip_address must name the robot"),
        ("localhost:50051", "holds a port"),
        ("192.168.1.42:8000", "holds a port"),
        ("a b", "is not a host name"),
        ("http://robot", "is not a host name"),
        ("user@robot", "is not a host name"),
    ],
)
def test_what_is_no_host_is_one_error_saying_why(host, said):
    with pytest.raises(ConfigError, match=said) as raised:
        check_host(host, **WHERE)
    assert raised.value.where == "robot.ip_address"


def test_a_port_given_with_the_host_is_pointed_to_its_setting():
    with pytest.raises(ConfigError) as raised:
        check_host("192.168.1.42:8000", **WHERE)
    assert raised.value.hint == "ip_address=192.168.1.42 and the port in robot.sdk_port"


@given(st.integers())
def test_ports_outside_1_to_65535_are_refused(port):
    if 0 < port <= 65535:
        check_port(port, where="robot.port")
    else:
        with pytest.raises(ConfigError, match=r"port must be in 1\.\.65535"):
            check_port(port, where="robot.port")
