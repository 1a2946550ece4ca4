"""Regressions for what the conformance fuzzer (tests/fuzz/fuzz.py) found; see docs/conformance.md."""

import asyncio
import struct

import pytest

from conftest import RawWebSocket


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
