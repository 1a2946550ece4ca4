"""Regressions for what the conformance fuzzer (tests/fuzz/fuzz.py) found; see docs/conformance.md."""

import asyncio
import struct

import pytest

from conftest import PASSWORD, RawWebSocket, unique_username


@pytest.mark.parametrize("reason", [b"\xff\xfe", b"ok\xed\xa0\x80", b"\xc0\xaf"], ids=["ff-fe", "surrogate", "overlong"])
async def test_close_reason_not_utf8_gets_1007(hw, reason):
    """Found by the fuzzer (frame.close_invalid_utf8_reason): the relay answered 1000 to a close frame
    whose reason is not UTF-8. RFC 6455 5.5.1/8.1: that fails the connection; the relay now sends 1007."""
    a, b = await hw.users("cra", "crb")
    await hw.befriend(a, b)

    def session():
        ws = RawWebSocket(hw.relay)
        try:
            ws.send_text('{"type":"hello","id":"h","token":"%s"}' % a.token)
            assert ws.read_json_reply("h").get("type") == "ok"
            ws.send_frame(0x8, struct.pack("!H", 1000) + reason)
            return ws.read_until_close()
        finally:
            ws.close()

    code, _ = await asyncio.to_thread(session)
    assert code == 1007, code
    await b.ok("friend.list")
    await hw.check_healthy()


async def test_close_reason_utf8_still_gets_1000(hw):
    def session():
        ws = RawWebSocket(hw.relay)
        try:
            ws.send_frame(0x8, struct.pack("!H", 1000) + "bye 👋".encode())
            return ws.read_until_close()
        finally:
            ws.close()

    code, _ = await asyncio.to_thread(session)
    assert code == 1000


def _send_and_read_until_eof(relay, request: bytes, timeout: float):
    """Sends `request` over TLS; returns (bytes received, seconds until the relay closed, or None)."""
    import socket
    import time

    from conftest import SERVER_HOSTNAME

    raw = socket.create_connection((relay.host, relay.port), timeout=timeout)
    sock = relay.ssl_ctx.wrap_socket(raw, server_hostname=SERVER_HOSTNAME)
    t0 = time.monotonic()
    data = b""
    try:
        try:
            sock.sendall(request)
        except OSError:
            pass
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                return data, None
            except OSError:
                return data, time.monotonic() - t0
            if not chunk:
                return data, time.monotonic() - t0
            data += chunk
    finally:
        sock.close()


@pytest.mark.parametrize("kind", ["100KB-header", "20000-headers", "garbage"])
async def test_refused_http_request_is_closed_at_once(hw, kind):
    """Found by the fuzzer (http.oversized_headers, http.garbage): after NIO's 400 the relay held the
    connection until the 10 s handshake timeout. It now closes right after the 400."""
    up = (b"GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
    request = {
        "100KB-header": up + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n",
        "20000-headers": up + b"".join(b"X-H%d: v\r\n" % i for i in range(20000)) + b"\r\n",
        "garbage": b"\x00\x01\x02 not http at all\r\n\r\n",
    }[kind]
    data, closed_after = await asyncio.to_thread(_send_and_read_until_eof, hw.relay, request, 8)
    assert data.startswith(b"HTTP/1.1 4"), data[:100]
    assert b" 101 " not in data.split(b"\r\n", 1)[0]
    assert closed_after is not None and closed_after < 5, closed_after
    await hw.check_healthy()


async def test_length_limits_count_code_points_not_grapheme_clusters(hw):
    """Found by the fuzzer (msg.long_strings): limits counted grapheme clusters, so a display name of one
    letter and 9000 combining marks (18 KB) passed as "1 character". Limits now count code points."""
    c = await hw.connect("zalgo")
    zalgo = "e" + "\u0301" * 64  # one grapheme cluster, 65 code points
    await c.err("register", "bad_request", username=unique_username("zg"), password=PASSWORD, name=zalgo)
    await c.err("register", "bad_request", username=unique_username("zg"), password=PASSWORD,
                name="e" + "\u0301" * 9000)
    a = await hw.register("zgo", name="\u00e9" * 64)  # 64 precomposed letters: fine
    await a.err("session.start", "bad_request", note="n" + "\u0301" * 280)
    await a.err("alarm.raise", "bad_request", text="t" + "\u0301" * 500)
    await a.err("alarm.contacts", "bad_request", usernames=["e" + "\u0301" * 40])
    await hw.check_healthy()


def _rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


async def test_pipelined_http_requests_that_are_never_read_do_not_grow_memory(own_hw):
    """Found by the fuzzer's follow-up (http.pipelined_unread): a client that pipelines GET /metrics
    without reading made the relay buffer every answer (4 x 5000 requests: +41 MB in a second). Once
    the socket is full the relay now answers `Connection: close` and serves nothing more."""
    import socket
    import time

    from conftest import SERVER_HOSTNAME

    relay = own_hw.relay
    pid = relay.proc.pid
    before = _rss_kb(pid)
    socks = []
    try:
        for _ in range(4):
            raw = socket.create_connection((relay.host, relay.port), timeout=10)
            s = relay.ssl_ctx.wrap_socket(raw, server_hostname=SERVER_HOSTNAME)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n" * 5000)
            socks.append(s)
        peak = before
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # sampling RSS over a window: there is no event to await
            peak = max(peak, _rss_kb(pid))
            await asyncio.sleep(0.1)
        assert peak - before < 16 * 1024, f"RSS grew {(peak - before) // 1024} MB"
    finally:
        for s in socks:
            s.close()
    # keep-alive HTTP still works for a client that reads
    assert relay.http_get("/healthz")[0] == 200
    await own_hw.check_healthy()
