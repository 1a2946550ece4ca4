"""What the relay shows and allows at its edge, checked from outside: metrics only on the metrics
listener (or with the bearer token), the Origin check on the WebSocket upgrade, failed `hello`s
limited per address, and a password login that a thief's connections cannot lock out.
Documented in docs/security.md and docs/protocol.md."""

from __future__ import annotations

import base64
import os
import secrets
import socket

import pytest

from conftest import PASSWORD, SERVER_HOSTNAME, Harness, started_relay

TOKEN = "metrics-" + secrets.token_hex(16)


def samples(body: bytes) -> dict[str, str]:
    return {line.split(" ", 1)[0].split("{", 1)[0]: line for line in body.decode().splitlines() if line and not line.startswith("#")}


# ------------------------------------------------------------------------------ metrics


def test_the_main_port_shows_no_activity_and_the_metrics_listener_shows_it(own_relay):
    status, headers, body = own_relay.http_get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain"), (status, headers)
    assert set(samples(body)) == {"homeward_up"}, body.decode()[:2000]
    status, headers, body = own_relay.metrics_get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain"), (status, headers)
    assert {"homeward_alarms_raised_total", "homeward_alarms_pending"} <= set(samples(body)), body.decode()[:2000]
    assert own_relay.metrics_get("/healthz")[0] == 200
    assert own_relay.metrics_get("/")[0] == 404
    assert own_relay.http_get("/healthz")[0] == 200, "health stays public on the main port"


@pytest.fixture
def token_relay(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("metrics-token"), "--metrics-token", TOKEN) as r:
        yield r


def test_with_a_token_the_metrics_need_it_on_both_ports(token_relay):
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, _, body = token_relay.http_get("/metrics", headers=bearer)
    assert status == 200 and "homeward_alarms_pending" in samples(body), body.decode()[:2000]
    status, _, body = token_relay.http_get("/metrics")
    assert status == 200 and set(samples(body)) == {"homeward_up"}
    status, headers, _ = token_relay.http_get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"})
    assert status == 401 and headers.get("www-authenticate", "").startswith("Bearer"), (status, headers)
    assert token_relay.metrics_get("/metrics")[0] == 401
    assert token_relay.metrics_get("/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401
    status, _, body = token_relay.metrics_get("/metrics", headers=bearer)
    assert status == 200 and "homeward_alarms_raised_total" in samples(body)


# ------------------------------------------------------------------------------ Origin


def upgrade_status(relay, origin: str | None) -> int:
    """The status of a WebSocket upgrade of /v1/ws sent with `origin` (none when None)."""
    raw = socket.create_connection((relay.host, relay.port), timeout=10)
    with relay.ssl_ctx.wrap_socket(raw, server_hostname=SERVER_HOSTNAME) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        origin_line = f"Origin: {origin}\r\n" if origin is not None else ""
        sock.sendall((f"GET /v1/ws HTTP/1.1\r\nHost: {relay.host}:{relay.port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"{origin_line}\r\n").encode())
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_an_upgrade_from_another_sites_page_is_refused_with_403(own_relay):
    own = f"https://{own_relay.host}:{own_relay.port}"
    assert upgrade_status(own_relay, "https://evil.example") == 403
    assert upgrade_status(own_relay, "null") == 403
    assert upgrade_status(own_relay, f"https://{own_relay.host}:{own_relay.port + 1}") == 403
    assert upgrade_status(own_relay, own) == 101, "the relay's own pages (the web app) connect"
    assert upgrade_status(own_relay, own.upper().replace("HTTPS", "https")) == 101, "origins compare case-insensitively"
    assert upgrade_status(own_relay, None) == 101, "clients that are not browsers send no Origin"


@pytest.fixture
def origins_relay(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("origins"), "--allowed-origins",
                       "https://app.example.org, https://walk.example.org:8443") as r:
        yield r


def test_the_listed_origins_replace_the_default(origins_relay):
    assert upgrade_status(origins_relay, "https://app.example.org") == 101
    assert upgrade_status(origins_relay, "https://app.example.org:443") == 101
    assert upgrade_status(origins_relay, "https://walk.example.org:8443") == 101
    assert upgrade_status(origins_relay, "http://app.example.org") == 403
    assert upgrade_status(origins_relay, f"https://{origins_relay.host}:{origins_relay.port}") == 403


# ------------------------------------------------------------------------------ sign-in


@pytest.fixture
def hello_limited_relay(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("hello-limited"), "--hello-failures-per-address", "3") as r:
        yield r


async def test_failed_hellos_are_limited_per_address_and_valid_tokens_still_sign_in(hello_limited_relay):
    hw = Harness(hello_limited_relay)
    try:
        owner = await hw.register("hellolim")
        first = await hw.connect("guess-1")
        for _ in range(2):
            await first.err("hello", "unauthenticated", token=secrets.token_urlsafe(32))
        second = await hw.connect("guess-2")
        await second.err("hello", "unauthenticated", token=secrets.token_urlsafe(32))
        await second.err("hello", "rate_limited", token=secrets.token_urlsafe(32))
        third = await hw.connect("guess-3")
        await third.err("hello", "rate_limited", token=secrets.token_urlsafe(32))
        await hw.hello(owner.token, label="owner-device")
    finally:
        await hw.aclose()


async def test_a_thiefs_16_connections_do_not_lock_the_owner_out(own_hw):
    hw = own_hw
    alice = await hw.register("stolen")
    # The registering connection moves to a token of its own and signs out: the stolen token has no connection.
    await alice.ok("login", username=alice.username, password=PASSWORD)
    await alice.ok("logout")
    thief = [await hw.hello(alice.token, label=f"thief-{i}") for i in range(16)]
    extra = await hw.connect("thief-17")
    await extra.err("hello", "rate_limited", token=alice.token)

    owner = await hw.login(alice.username, label="owner")
    assert await thief[0].wait_closed() == 1008
    assert "password sign-in" in (thief[0].close_reason or ""), thief[0].close_reason
    for c in thief[1:]:
        assert not c.closed

    sessions = (await owner.ok("auth.sessions"))["sessions"]
    stolen = next(s for s in sessions if not s["current"])
    await owner.ok("auth.revoke", tokenId=stolen["id"])
    for c in thief[1:]:
        assert await c.wait_closed() == 1008
    await owner.ok("auth.sessions")
