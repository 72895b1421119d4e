"""The test clusters' port picker (ray_cluster.free_ports): Ray refuses a node whose components share a port."""
from __future__ import annotations

import socket

from ray_cluster import free_ports, node_ports


def test_ports_are_distinct_within_and_across_calls_and_bindable():
    first, second = free_ports(40), free_ports(40)
    assert len(set(first)) == 40 and not set(first) & set(second)
    with socket.socket() as s:
        s.bind(("127.0.0.1", second[0]))  # free when handed out


def test_a_node_gets_six_distinct_ports():
    ports = [int(flag.split("=")[1]) for flag in node_ports()]
    assert len(ports) == 6 and len(set(ports)) == 6
