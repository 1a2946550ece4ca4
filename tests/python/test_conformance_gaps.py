"""Contract points the other files leave open: every error code and close code from outside
(rate_limited, 1000, 1001, 1002, 1008 after failed sign-ins), several devices per user for every
kind of event, and alarms raised to a user whose other device stays online."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest

from conftest import PASSWORD, Harness, RawWebSocket, Relay, by_name, unique_username


@pytest.fixture
def limited_relay(relay_binary, tmp_path_factory):
    """A relay with tiny limits: 2 requests/s (burst 4), 2 connections per user, 2 failed logins per user."""
    r = Relay(relay_binary, tmp_path_factory.mktemp("limited-relay"))
    r.extra_args = ["--rate-limit", "2", "--max-connections-per-user", "2", "--login-failures-per-user", "2"]
    r.start()
    yield r
    r.stop()


@pytest.fixture
def limited_hw(limited_relay):
    limited_relay.mark_log()
    return Harness(limited_relay)


# ------------------------------------------------------------------------------ rate_limited


async def test_rate_limited_per_connection_then_recovers(limited_hw):
    hw = limited_hw
    a = await hw.register("rla")
    # a burst well over 2/s (burst 4): some replies are rate_limited, each request gets one reply
    rids = list(range(100, 112))
    for rid in rids:
        await a.send_json({"type": "ping", "id": rid})
    last = await a.send_and_wait(json.dumps({"type": "ping", "id": "last"}), "last")
    # every request of the burst got exactly one reply carrying its id
    got = {m["re"]: m for m in a.received if isinstance(m, dict) and m.get("re") in rids}
    assert sorted(got) == rids, a.received
    codes = [got[r].get("code") if got[r]["type"] == "error" else "ok" for r in rids]
    assert "rate_limited" in codes, codes
    assert set(codes) <= {"ok", "rate_limited"}, codes
    assert not a.closed
    # the bucket refills: a request a little later is served
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        r = await a.request("ping")
        if r["type"] == "ok":
            break
        assert r.get("code") == "rate_limited", r
        assert asyncio.get_running_loop().time() < deadline, "still rate limited after 10 s"
        await asyncio.sleep(0.5)  # waiting for a token bucket to refill (time is the condition)
    assert last["type"] in ("ok", "error")


async def test_rate_limited_connections_per_user(limited_hw):
    hw = limited_hw
    a = await hw.register("rlc")
    await hw.another_device(a)  # two connections: the limit
    extra = await hw.connect("third")
    r = await extra.request("hello", token=a.token)
    assert r["type"] == "error" and r["code"] == "rate_limited", r
    assert not extra.closed
    await extra.ok("ping")


async def test_rate_limited_failed_logins_per_user(limited_hw):
    hw = limited_hw
    a = await hw.register("rll")
    c = await hw.connect("guesser")
    for _ in range(2):
        await c.err("login", "unauthenticated", username=a.username, password="wrong password")
    # over the per-user limit: refused even with the right password
    await c.err("login", "rate_limited", username=a.username, password=PASSWORD)
    # the token keeps working
    d = await hw.hello(a.token)
    await d.ok("friend.list")


# ------------------------------------------------------------------------------ close codes


def _raw(relay, token=None):
    ws = RawWebSocket(relay)
    if token:
        ws.send_text(json.dumps({"type": "hello", "id": "h", "token": token}))
        assert ws.read_json_reply("h").get("type") == "ok"
    return ws


def _unmasked_text(payload: bytes) -> bytes:
    return bytes([0x81, len(payload)]) + payload


async def test_protocol_error_closes_with_1002_and_others_unaffected(hw):
    a, b = await hw.users("pea", "peb")
    await hw.befriend(a, b)

    def session():
        ws = _raw(hw.relay, a.token)
        try:
            ws.sock.sendall(_unmasked_text(b'{"type":"ping","id":1}'))
            return ws.read_until_close()
        finally:
            ws.close()

    code, texts = await asyncio.to_thread(session)
    assert code == 1002, (code, texts)
    await b.ok("friend.list")
    assert not b.closed
    await hw.check_healthy()


@pytest.mark.parametrize("opcode", [0x3, 0xB])
async def test_reserved_opcode_closes_with_1002(hw, opcode):
    def session():
        ws = _raw(hw.relay)
        try:
            ws.send_frame(opcode, b"x")
            return ws.read_until_close()
        finally:
            ws.close()

    code, _ = await asyncio.to_thread(session)
    assert code == 1002


async def test_client_close_is_answered_with_1000(hw):
    a = await hw.register("cla")

    def session():
        ws = _raw(hw.relay, a.token)
        try:
            ws.send_frame(0x8, struct.pack("!H", 1000) + b"bye")
            return ws.read_until_close()
        finally:
            ws.close()

    code, _ = await asyncio.to_thread(session)
    assert code == 1000


@pytest.mark.parametrize("body", [struct.pack("!H", 1005), struct.pack("!H", 999), b"\x03"], ids=["1005", "999", "1byte"])
async def test_invalid_close_frame_gets_1002(hw, body):
    def session():
        ws = _raw(hw.relay)
        try:
            ws.send_frame(0x8, body)
            return ws.read_until_close()
        finally:
            ws.close()

    code, _ = await asyncio.to_thread(session)
    assert code == 1002


async def test_too_many_failed_hellos_close_with_1008(hw):
    c = await hw.connect("guess")
    for i in range(5):
        await c.err("hello", "unauthenticated", token=f"not-a-token-{i}")
    code = await c.wait_closed(timeout=10)
    assert code == 1008, (code, c.close_reason)
    await hw.check_healthy()


async def test_sigterm_closes_connections_with_1001_and_keeps_data(own_hw):
    hw = own_hw
    a, b = await hw.users("gaa", "gab")
    await hw.befriend(a, b)
    await asyncio.to_thread(hw.relay.stop)  # SIGTERM
    assert await a.wait_closed(timeout=15) == 1001
    assert await b.wait_closed(timeout=15) == 1001
    await asyncio.to_thread(hw.relay.start)
    a2 = await hw.hello(a.token)
    assert [f["username"] for f in (await a2.ok("friend.list"))["friends"]] == [b.username]


# ------------------------------------------------------------------------------ several devices


async def test_every_event_reaches_every_device(hw):
    a, b, c = await hw.users("mda", "mdb", "mdc")
    await hw.befriend(a, b)
    a2 = await hw.another_device(a, label="a-phone")
    a3 = await hw.another_device(a, label="a-watch")
    devices = (a, a2, a3)
    # friend request from a stranger reaches all three devices
    await c.ok("friend.request", username=a.username)
    for d in devices:
        ev = await d.expect_event("friend.request")
        assert by_name(ev["from"]) == c.username
    # accepting on one device: friend.added on all devices
    await a2.ok("friend.accept", username=c.username)
    for d in devices:
        await d.expect_event("friend.added", predicate=lambda e: by_name(e["user"]) == c.username)
    # an alarm from b reaches all of a's devices; an ack from one device is seen by b
    aid = (await b.ok("alarm.raise", to=[a.username]))["alarm"]["alarmId"]
    for d in devices:
        ev = await d.expect_event("alarm")
        assert ev["alarm"]["alarmId"] == aid
    await a3.ok("alarm.ack", alarmId=aid)
    ev = await b.expect_event("alarm.acked")
    assert ev["alarmId"] == aid and by_name(ev["by"]) == a.username
    # b's positions stream to each of a's devices exactly once
    await b.send_json({"type": "pos", "lat": 1.0, "lon": 2.0})
    for d in devices:
        ev = await d.expect_event("pos", predicate=lambda e: e.get("from") == b.username)
        assert ev["lat"] == 1.0
        await d.sync()
        assert not d.events_of("pos", lambda e: e.get("from") == b.username)
    await b.ok("alarm.cancel", alarmId=aid)
    for d in devices:
        await d.expect_event("alarm.cancelled", predicate=lambda e: e["alarmId"] == aid)
    # a session started from one device is the user's: the other device sees it in session.list
    s = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    lst = await a2.ok("session.list")
    assert lst["own"] and lst["own"]["sessionId"] == s
    await a3.ok("session.end", sessionId=s)
    await b.expect_event("session.ended", predicate=lambda e: e["sessionId"] == s)


async def test_logout_on_one_device_keeps_the_others(hw):
    a, b = await hw.users("loa", "lob")
    await hw.befriend(a, b)
    a2 = await hw.login(a.username)  # second device with its own token
    await a.ok("logout")
    await a.err("friend.list", "unauthenticated")
    # the other device and its token are unaffected; a is still online for b
    await a2.ok("friend.list")
    lst = await b.ok("friend.list")
    assert [f["online"] for f in lst["friends"] if f["username"] == a.username] == [True]
    await hw.hello(a2.token)


async def test_alarm_to_offline_user_delivered_at_first_login_on_each_device(hw):
    a, b = await hw.users("ada", "adb")
    await hw.befriend(a, b)
    await hw.go_offline(b, watcher=a)
    aid = (await a.ok("alarm.raise", text="are you ok"))["alarm"]["alarmId"]
    d1 = await hw.hello(b.token, label="b-phone")
    d2 = await hw.login(b.username, label="b-laptop")
    for d in (d1, d2):
        ev = await d.expect_event("alarm")
        assert ev["alarm"]["alarmId"] == aid and ev["alarm"]["text"] == "are you ok"


async def test_unknown_fields_ignored_and_string_ids_echoed(hw):
    a = await hw.register("unf")
    r = await a.send_and_wait(json.dumps({"type": "friend.list", "id": "x-1", "future": {"a": [1, 2]}, "z": None}), "x-1")
    assert r["type"] == "ok" and r["re"] == "x-1"
    await a.err("user.search", "bad_request", query=123)
    await a.err("nonsense.type", "unsupported")
    await a.err("friend.request", "not_found", username=unique_username("nobody"))
