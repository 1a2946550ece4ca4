"""Position relay: who gets a `pos`, exactly once, and validation."""

import json
import time

import pytest

from conftest import NO_ID


async def session_with_observers(hw, owner, observers, declined=(), pending=()):
    for x in (*observers, *declined, *pending):
        await hw.befriend(owner, x)
    invite = [x.username for x in (*observers, *declined, *pending)]
    sid = (await owner.ok("session.start", invite=invite))["session"]["sessionId"]
    for x in observers:
        await x.expect_event("session.invite")
        await x.ok("session.accept", sessionId=sid)
        await owner.expect_event("session.accepted", predicate=lambda e, x=x: e["by"] == x.username
                                 or (isinstance(e["by"], dict) and e["by"].get("username") == x.username))
    for x in declined:
        await x.expect_event("session.invite")
        await x.ok("session.decline", sessionId=sid)
    for x in pending:
        await x.expect_event("session.invite")
    return sid


def assert_fields(ev, expected):
    """The relay may add fields; the ones the contract names must be as sent."""
    for k, v in expected.items():
        assert k in ev and ev[k] == v and type(ev[k]) in (int, float, str), (k, v, ev)
    assert "re" not in ev and "id" not in ev, ev


def at(lat):
    return lambda e: e.get("lat") == lat


async def test_pos_reaches_every_observer_exactly_once(hw):
    a, b, c, d, e, f, g = await hw.users("ppa", "ppb", "ppc", "ppd", "ppe", "ppf", "ppg")
    await session_with_observers(hw, a, observers=[b, c], declined=[d], pending=[g])
    await hw.befriend(a, e)  # a friend not invited
    # f: not a friend at all

    await a.request("pos", id=NO_ID, lat=57.7089, lon=11.9746, acc=8, ts=1763830000000)
    for x in (b, c):
        ev = await x.expect_event("pos", predicate=at(57.7089))
        assert_fields(ev, {"type": "pos", "from": a.username, "lat": 57.7089, "lon": 11.9746, "acc": 8,
                           "ts": 1763830000000})
    await a.sync()  # a's position went out to every loop
    # exactly once: no duplicate arrives
    for x in (b, c):
        await x.no_event("pos", predicate=at(57.7089))
    # nobody else
    for x in (a, d, e, f, g):
        await x.no_event("pos")

    # a second position, with every optional field; order is kept
    await a.request("pos", id=NO_ID, lat=-33.5, lon=-70.25, acc=0, alt=-12.5, spd=1.4, hdg=359.5, batt=100,
                    ts=1763830001000)
    for x in (b, c):
        ev = await x.expect_event("pos")
        assert_fields(ev, {"type": "pos", "from": a.username, "lat": -33.5, "lon": -70.25, "acc": 0,
                           "alt": -12.5, "spd": 1.4, "hdg": 359.5, "batt": 100, "ts": 1763830001000})
    await a.sync()
    for x in (a, d, e, f, g):
        await x.no_event("pos")


async def test_valid_pos_without_id_gets_no_reply_and_ts_defaults(hw):
    a, b = await hw.users("pna", "pnb")
    await session_with_observers(hw, a, observers=[b])
    before = len(a.received)
    t0 = int(time.time() * 1000)
    await a.request("pos", id=NO_ID, lat=10.5, lon=20.5)
    ev = await b.expect_event("pos")
    t1 = int(time.time() * 1000)
    assert ev["from"] == a.username and ev["lat"] == 10.5 and ev["lon"] == 20.5
    assert isinstance(ev["ts"], int) and t0 - 5_000 <= ev["ts"] <= t1 + 5_000, ev
    await a.sync()
    # the only reply a received since is the ping's
    replies = [m for m in a.received[before:] if m.get("type") in ("ok", "error")]
    assert len(replies) == 1 and "re" in replies[0], replies
    # with an id, a valid pos gets ok
    r = await a.request("pos", id="with-id", lat=10.6, lon=20.6)
    assert r["type"] == "ok" and r["re"] == "with-id"
    await b.expect_event("pos", predicate=at(10.6))


async def test_boundary_values_are_valid(hw):
    a, b = await hw.users("pva", "pvb")
    await session_with_observers(hw, a, observers=[b])
    valid = [
        {"lat": 90, "lon": 180},
        {"lat": -90, "lon": -180},
        {"lat": 0, "lon": 0, "hdg": 0, "batt": 0, "acc": 0, "spd": 0},
        {"lat": 1.25, "lon": 2.5, "hdg": 359.999, "batt": 100, "alt": -400},
        {"lat": 1.5, "lon": 2.5, "alt": 8848.86},
    ]
    for fields in valid:
        await a.ok("pos", **fields)
        ev = await b.expect_event("pos")
        for k, v in fields.items():
            assert ev[k] == v, (fields, ev)


BAD_POSITIONS = [
    {"lat": 91, "lon": 0},
    {"lat": -90.0001, "lon": 0},
    {"lat": 0, "lon": -181},
    {"lat": 0, "lon": 180.5},
    {"lat": 0, "lon": 0, "hdg": 360},
    {"lat": 0, "lon": 0, "hdg": -1},
    {"lat": 0, "lon": 0, "batt": 101},
    {"lat": 0, "lon": 0, "batt": -0.5},
    {"lat": 0, "lon": 0, "acc": -1},
    {"lat": 0, "lon": 0, "spd": -0.1},
    {"lat": "57.7", "lon": 11.9},
    {"lat": 57.7, "lon": "11.9"},
    {"lat": True, "lon": 11.9},
    {"lat": None, "lon": 11.9},
    {"lat": [57.7], "lon": 11.9},
    {"lat": 57.7},
    {"lon": 11.9},
    {},
    {"lat": 0, "lon": 0, "acc": "8"},
    {"lat": 0, "lon": 0, "ts": "now"},
]

# Not finite: JSON has no NaN/Infinity, but 1e999 overflows a double.
BAD_RAW = [
    '{"type": "pos", "id": "%s", "lat": 1e999, "lon": 0}',
    '{"type": "pos", "id": "%s", "lat": 0, "lon": -1e999}',
    '{"type": "pos", "id": "%s", "lat": 0, "lon": 0, "alt": 1e999}',
    '{"type": "pos", "id": "%s", "lat": 0, "lon": 0, "acc": 1e999}',
    '{"type": "pos", "id": "%s", "lat": NaN, "lon": 0}',
]


async def test_invalid_positions_are_rejected_and_not_relayed(hw):
    a, b = await hw.users("pia", "pib")
    await session_with_observers(hw, a, observers=[b])
    for fields in BAD_POSITIONS:
        r = await a.request("pos", **fields)
        assert r["type"] == "error" and r["code"] == "bad_request", (fields, r)
    for i, raw in enumerate(BAD_RAW):
        rid = f"raw{i}"
        # A parser may refuse these numbers outright (then there is no id to echo): accept
        # either the reply or an id-less error, but it must be bad_request.
        r = await a.send_expect_error(raw % rid, rid)
        assert r["type"] == "error" and r["code"] == "bad_request", (raw, r)
        assert r.get("re", rid) == rid, r
    # without an id, an invalid pos is answered with an error that carries no `re`
    await a.request("pos", id=NO_ID, lat=95, lon=0)
    ev = await a.expect_event("error")
    assert ev["code"] == "bad_request" and "re" not in ev, ev
    # the next valid position is the first thing b gets
    await a.request("pos", id=NO_ID, lat=12.5, lon=13.5)
    ev = await b.expect_event("pos")
    assert ev["lat"] == 12.5 and ev["lon"] == 13.5, ev
    await b.sync()
    assert not b.events_of("pos"), b.events_of("pos")
    assert not a.closed and not b.closed
    await hw.check_healthy()


async def test_observer_that_left_gets_no_more_positions(hw):
    a, b, c = await hw.users("pla", "plb", "plc")
    sid = await session_with_observers(hw, a, observers=[b, c])
    await b.ok("session.leave", sessionId=sid)
    await a.expect_event("session.left")
    await a.request("pos", id=NO_ID, lat=5.0, lon=6.0)
    await c.expect_event("pos", predicate=at(5.0))
    await a.sync()
    await b.no_event("pos")


async def test_observer_with_two_devices_gets_pos_on_each_once(hw):
    a, b = await hw.users("p2a", "p2b")
    await session_with_observers(hw, a, observers=[b])
    b2 = await hw.another_device(b)
    await a.request("pos", id=NO_ID, lat=7.0, lon=8.0)
    for x in (b, b2):
        await x.expect_event("pos", predicate=at(7.0))
    await a.sync()
    for x in (b, b2):
        await x.no_event("pos", predicate=at(7.0))
