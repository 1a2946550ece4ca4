"""Panic alarms."""

import time

from conftest import NO_ID, by_name, unique_username


def check_alarm(alarm, owner, *, text=None, lat=None, lon=None, acked=()):
    assert isinstance(alarm, dict), alarm
    assert isinstance(alarm.get("alarmId"), str) and alarm["alarmId"], alarm
    assert alarm.get("from") == {"username": owner.username, "name": owner.name}, alarm
    assert isinstance(alarm.get("text"), str) and alarm["text"], alarm
    if text is not None:
        assert alarm["text"] == text, alarm
    assert "position" in alarm, alarm
    if lat is not None:
        assert alarm["position"]["lat"] == lat and alarm["position"]["lon"] == lon, alarm
    assert isinstance(alarm.get("createdAt"), int) and abs(alarm["createdAt"] - time.time() * 1000) < 3_600_000
    assert sorted(alarm.get("acked")) == sorted(acked), alarm


def recipients_of(reply):
    return {r["username"]: r["online"] for r in reply["recipients"]}


async def test_raise_to_friends_with_online_flags(hw):
    a, b, c, d = await hw.users("ara", "arb", "arc", "ard")
    for x in (b, c):
        await hw.befriend(a, x)
    await hw.go_offline(c, watcher=a)
    r = await a.ok("alarm.raise", text="help me", lat=57.7, lon=11.9, acc=12)
    check_alarm(r["alarm"], a, text="help me", lat=57.7, lon=11.9)
    assert recipients_of(r) == {b.username: True, c.username: False}, r
    ev = await b.expect_event("alarm")
    check_alarm(ev["alarm"], a, text="help me", lat=57.7, lon=11.9)
    assert ev["alarm"]["alarmId"] == r["alarm"]["alarmId"]
    await d.no_event("alarm")
    await a.no_event("alarm")


async def test_default_text_and_no_position(hw):
    a, b = await hw.users("ata", "atb")
    await hw.befriend(a, b)
    r = await a.ok("alarm.raise")
    check_alarm(r["alarm"], a)
    assert r["alarm"]["text"].strip()
    ev = await b.expect_event("alarm")
    assert ev["alarm"]["text"] == r["alarm"]["text"]


async def test_to_limits_recipients_and_must_be_friends(hw):
    a, b, c, d = await hw.users("aoa", "aob", "aoc", "aod")
    for x in (b, c):
        await hw.befriend(a, x)
    await a.err("alarm.raise", "forbidden", to=[b.username, d.username])
    await b.no_event("alarm")
    await d.no_event("alarm")
    r = await a.ok("alarm.raise", to=[b.username], text="only b")
    assert recipients_of(r) == {b.username: True}, r
    await b.expect_event("alarm")
    await c.no_event("alarm")


async def test_contacts_set_get_and_used(hw):
    a, b, c = await hw.users("aca", "acb", "acc")
    for x in (b, c):
        await hw.befriend(a, x)
    r = await a.ok("alarm.contacts", usernames=[c.username])
    assert r["usernames"] == [c.username]
    r = await a.ok("alarm.contacts")
    assert r["usernames"] == [c.username]
    r = await a.ok("alarm.raise")
    assert recipients_of(r) == {c.username: True}, r
    await c.expect_event("alarm")
    await b.no_event("alarm")
    # `to` wins over the contacts
    await a.ok("alarm.cancel", alarmId=r["alarm"]["alarmId"])
    r = await a.ok("alarm.raise", to=[b.username])
    assert recipients_of(r) == {b.username: True}, r
    await a.err("alarm.contacts", "bad_request", usernames="not-a-list")


async def test_ack_and_cancel(hw):
    a, b, c = await hw.users("aka", "akb", "akc")
    for x in (b, c):
        await hw.befriend(a, x)
    alarm = (await a.ok("alarm.raise", text="ack me"))["alarm"]
    aid = alarm["alarmId"]
    await b.expect_event("alarm")
    await c.expect_event("alarm")

    await b.ok("alarm.ack", alarmId=aid)
    for x in (a, c):
        ev = await x.expect_event("alarm.acked")
        assert ev["alarmId"] == aid and by_name(ev["by"]) == b.username, ev

    await b.err("alarm.cancel", "forbidden", alarmId=aid)
    await c.err("alarm.cancel", "forbidden", alarmId=aid)
    await a.err("alarm.ack", "not_found", alarmId="no-such-alarm-" + unique_username("x"))
    await a.err("alarm.cancel", "not_found", alarmId="no-such-alarm-" + unique_username("x"))

    await a.ok("alarm.cancel", alarmId=aid, reason="false alarm")
    for x in (b, c):
        ev = await x.expect_event("alarm.cancelled")
        assert ev["alarmId"] == aid and ev["reason"] == "false alarm", ev
    await c.err("alarm.ack", "not_found", alarmId=aid)


async def test_offline_recipient_gets_alarm_at_login_until_cancelled(hw):
    a, b = await hw.users("afa", "afb")
    await hw.befriend(a, b)
    await hw.go_offline(b, watcher=a)
    r = await a.ok("alarm.raise", text="where are you")
    assert recipients_of(r) == {b.username: False}
    aid = r["alarm"]["alarmId"]
    b2 = await hw.login(b.username)
    ev = await b2.expect_event("alarm")
    check_alarm(ev["alarm"], a, text="where are you")
    assert ev["alarm"]["alarmId"] == aid
    # delivered again at the next authentication while active
    b3 = await hw.another_device(b2)
    ev = await b3.expect_event("alarm")
    assert ev["alarm"]["alarmId"] == aid
    await b2.close()
    await b3.close()
    await a.expect_event("presence", predicate=lambda e: e.get("username") == b.username and e.get("online") is False)
    await a.ok("alarm.cancel", alarmId=aid)
    b4 = await hw.login(b.username)
    await b4.no_event("alarm")


async def test_alarm_survives_sigkill_restart(own_hw):
    hw = own_hw
    a, b = await hw.users("aza", "azb")
    await hw.befriend(a, b)
    await hw.go_offline(b, watcher=a)
    aid = (await a.ok("alarm.raise", text="stored first"))["alarm"]["alarmId"]
    # "An alarm is stored before the reply is sent": kill -9 right after the reply.
    await hw.relay.restart_async(hard=True)
    await hw.aclose()
    b2 = await hw.login(b.username)
    ev = await b2.expect_event("alarm")
    assert ev["alarm"]["alarmId"] == aid and ev["alarm"]["text"] == "stored first"
    check_alarm(ev["alarm"], a, text="stored first")
    # still active: the owner can cancel it and b is told
    a2 = await hw.login(a.username)
    await a2.ok("alarm.cancel", alarmId=aid)
    await b2.expect_event("alarm.cancelled", predicate=lambda e: e["alarmId"] == aid)


async def test_owner_positions_stream_to_recipients_while_active(hw):
    a, b, c = await hw.users("apa", "apb", "apc")
    for x in (b, c):
        await hw.befriend(a, x)
    aid = (await a.ok("alarm.raise", to=[b.username]))["alarm"]["alarmId"]
    await b.expect_event("alarm")
    await a.request("pos", id=NO_ID, lat=48.1, lon=11.5, acc=5)
    ev = await b.expect_event("pos")
    assert ev["from"] == a.username and ev["lat"] == 48.1 and ev["lon"] == 11.5, ev
    await a.sync()  # a's position went out to every loop
    await b.no_event("pos", predicate=lambda e: e.get("lat") == 48.1)
    await c.no_event("pos")
    await a.ok("alarm.cancel", alarmId=aid)
    await b.expect_event("alarm.cancelled")
    await a.request("pos", id=NO_ID, lat=48.2, lon=11.6)
    await a.sync()
    await b.no_event("pos")


async def test_session_observer_and_alarm_recipient_gets_pos_once(hw):
    a, b = await hw.users("aba", "abb")
    await hw.befriend(a, b)
    sid = (await a.ok("session.start"))["session"]["sessionId"]
    await b.expect_event("session.invite")
    await b.ok("session.accept", sessionId=sid)
    await a.ok("alarm.raise")
    await b.expect_event("alarm")
    await a.request("pos", id=NO_ID, lat=9.5, lon=9.5)
    await b.expect_event("pos", predicate=lambda e: e.get("lat") == 9.5)
    await a.sync()
    await b.no_event("pos", predicate=lambda e: e.get("lat") == 9.5)
