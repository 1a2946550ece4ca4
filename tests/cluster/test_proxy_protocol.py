"""Behind haproxy each relay sees every client's own address, not haproxy's (issue 13): haproxy puts a
PROXY protocol v2 header before each connection's bytes (deploy/haproxy.cfg, send-proxy-v2) and the
relays trust it from haproxy's address alone (--proxy-protocol-from, cluster.py's BALANCER_SOURCE).
The suite's clients all connect from 127.0.0.1; here one connects from 127.0.0.9 instead, so that its
address cannot be mistaken for anybody else's."""

from __future__ import annotations

import asyncio
import socket
import ssl

from cluster import BALANCER_SOURCE, wait_until

CLIENT_ADDRESS = "127.0.0.9"


def logs_since_mark(nodes) -> str:
    return "\n".join(node.log_since_mark() for node in nodes)


async def test_a_relay_behind_haproxy_knows_the_client_by_its_own_address(hw, nodes, balancer):
    client = await hw.connect("from 127.0.0.9", endpoint=balancer, local_addr=(CLIENT_ADDRESS, 0))
    # More pings than --control-frame-rate allows (bursts of 20): closed with 1008, and logged with its peer.
    for _ in range(25):
        await client.ws.ping()
    assert await client.wait_closed(timeout=10) == 1008, client.close_reason
    # The relay names whom it closed; that name is the client's address, which only the header carried.
    line = await asyncio.to_thread(wait_until, "a relay logging the closed connection",
                                   lambda: next((l for l in logs_since_mark(nodes).splitlines()
                                                 if "closing a connection" in l and "peer=" in l), None), 10)
    assert f"peer={CLIENT_ADDRESS}" in line, line
    assert BALANCER_SOURCE not in line, line


async def test_a_connection_from_haproxys_address_without_a_header_is_closed(hw, nodes):
    node = nodes[0]

    def handshake_without_header():
        with socket.create_connection((node.host, node.port), timeout=10, source_address=(BALANCER_SOURCE, 0)) as raw:
            try:
                with node.ssl_ctx.wrap_socket(raw, server_hostname="localhost"):
                    return "handshake completed"
            except (ssl.SSLError, OSError) as error:
                return error

    outcome = await asyncio.to_thread(handshake_without_header)
    assert isinstance(outcome, Exception), "a relay spoke TLS to haproxy's address without a PROXY header"
    line = await asyncio.to_thread(wait_until, "the relay logging why it closed the connection",
                                   lambda: next((l for l in node.log_since_mark().splitlines()
                                                 if "PROXY protocol balancer" in l), None), 10)
    assert f"balancer={BALANCER_SOURCE}" in line and "no PROXY protocol header" in line, line
    # Clients straight from 127.0.0.1 (not haproxy's address) are served as before.
    await hw.register("direct", endpoint=node)
