"""Hostile input: oversized messages, invalid UTF-8, silent connections. After each, a fresh client
can still log in and stored friendships are intact."""

import asyncio
import json
import time

import pytest

from conftest import RawWebSocket


async def test_too_large_message_closes_with_1009(hw):
    a, b, c = await hw.users("tla", "tlb", "tlc")
    await hw.befriend(b, c)
    big = json.dumps({"type": "ping", "id": "big", "pad": "x" * (70 * 1024)})
    assert len(big) > 70 * 1024
    try:
        await a.send_raw(big)
    except Exception:  # noqa: BLE001 - the relay may close while we are still writing
        pass
    code = await a.wait_closed(timeout=15)
    assert code == 1009, (code, a.close_reason)
    errors = [m for m in a.received if isinstance(m, dict) and m.get("type") == "error"]
    assert [e.get("code") for e in errors] == ["too_large"], a.received
    assert not [m for m in a.received if isinstance(m, dict) and m.get("re") == "big" and m.get("type") == "ok"]
    # other clients undisturbed
    await b.ok("friend.list")
    await c.ok("friend.list")
    assert not b.closed and not c.closed
    # the account is fine: log in again
    a2 = await hw.login(a.username)
    await a2.ok("friend.list")
    await hw.check_healthy()


async def test_message_just_under_the_limit_is_fine(hw):
    a = await hw.register("tlu")
    text = json.dumps({"type": "ping", "id": "near", "pad": "y" * (60 * 1024)})
    r = await a.send_and_wait(text, "near")
    assert r["type"] == "ok"
    assert not a.closed


async def test_invalid_utf8_text_frame_closes_with_1007(hw):
    a, b = await hw.users("u8a", "u8b")
    await hw.befriend(a, b)
    token = a.token

    def raw_session():
        ws = RawWebSocket(hw.relay)
        try:
            ws.send_text(json.dumps({"type": "hello", "id": 1, "token": token}))
            reply = ws.read_json_reply(1)
            assert reply.get("type") == "ok", reply
            ws.send_frame(0x1, b'{"type": "ping", "id": 2, "x": "\xff\xfe\xc3"}')
            return ws.read_until_close()
        finally:
            ws.close()

    code, texts = await asyncio.to_thread(raw_session)
    assert code == 1007, (code, texts)
    # nothing was processed from that frame
    assert not any('"re":2' in t.replace(" ", "") for t in texts), texts
    # b is undisturbed and a's account and friendship are intact
    await b.ok("friend.list")
    a2 = await hw.login(a.username)
    assert [f["username"] for f in (await a2.ok("friend.list"))["friends"]] == [b.username]
    await hw.check_healthy()


async def test_invalid_utf8_before_authentication_closes_with_1007(hw):
    def raw_session():
        ws = RawWebSocket(hw.relay)
        try:
            ws.send_frame(0x1, b"\xc0\xaf")
            return ws.read_until_close()
        finally:
            ws.close()

    code, texts = await asyncio.to_thread(raw_session)
    assert code == 1007, (code, texts)
    await hw.check_healthy()


@pytest.mark.slow
async def test_unauthenticated_connection_closed_with_1008(hw):
    signed_in = await hw.register("ato")
    await hw.check_healthy()  # do the sentinel set-up before timing starts
    silent = await hw.connect("silent", ping_interval=None)
    t0 = time.monotonic()
    code = await silent.wait_closed(timeout=15)
    elapsed = time.monotonic() - t0
    assert code == 1008, (code, silent.close_reason)
    assert 5 <= elapsed <= 14, elapsed
    # an authenticated connection opened at the same time is not affected
    assert not signed_in.closed
    await signed_in.ok("friend.list")
    await hw.check_healthy()
