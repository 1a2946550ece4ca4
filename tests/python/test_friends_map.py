"""Friends' map (issue 15): standing share with chosen friends, pauses, meeting points, messages."""

import time

import pytest

from conftest import NO_ID


def now_ms() -> int:
    return int(time.time() * 1000)


async def friends_of(hw, owner_prefix, *prefixes):
    """Registers an owner and friends of theirs; returns [owner, *friends]."""
    users = await hw.users(owner_prefix, *prefixes)
    for friend in users[1:]:
        await hw.befriend(users[0], friend)
    return users


async def pos(client, lat, lon=11.5):
    await client.request("pos", id=NO_ID, lat=lat, lon=lon)


def at(lat):
    return lambda e: e.get("lat") == lat


async def test_only_chosen_friends_receive_standing_share_positions(hw):
    a, b, c = await friends_of(hw, "ssa", "ssb", "ssc")
    reply = await a.ok("share.always", **{"with": [b.username]})
    assert reply["with"] == [b.username] and reply["pauses"] == [], reply
    ev = await b.expect_event("friend.sharing")
    assert ev == {"type": "friend.sharing", "username": a.username, "sharing": True}, ev
    await pos(a, 48.01)
    ev = await b.expect_event("pos", predicate=at(48.01))
    assert ev["from"] == a.username
    await a.sync()  # a's position went out to every loop
    await b.no_event("pos", predicate=at(48.01))  # exactly once
    await c.no_event("pos")
    await c.no_event("friend.sharing")

    located = await b.ok("friend.location", username=a.username)
    assert located["username"] == a.username and located["position"]["lat"] == 48.01, located
    assert isinstance(located["age"], int) and 0 <= located["age"] < 10_000, located
    await c.err("friend.location", "forbidden", username=a.username)
    assert (await a.ok("share.always"))["with"] == [b.username], "read back without `with`"

    await a.ok("share.always", **{"with": []})
    ev = await b.expect_event("friend.sharing")
    assert ev["sharing"] is False, ev
    await pos(a, 48.02)
    await a.sync()
    await b.no_event("pos", predicate=at(48.02))
    await b.err("friend.location", "forbidden", username=a.username)


async def test_a_paused_users_positions_reach_no_one_but_alarm_recipients(hw):
    a, b, c, d = await friends_of(hw, "spa", "spb", "spc", "spd")
    await a.ok("share.always", **{"with": [b.username]})
    sid = (await a.ok("session.start", invite=[c.username]))["session"]["sessionId"]
    await c.expect_event("session.invite")
    await c.ok("session.accept", sessionId=sid)
    token = (await a.ok("share.create", sessionId=sid))["share"]["token"]
    viewer = await hw.connect("viewer")
    assert (await viewer.request("watch", token=token))["type"] == "ok"
    await pos(a, 47.01)
    for x in (b, c, viewer):
        await x.expect_event("pos", predicate=at(47.01))

    paused = await a.ok("location.pause")
    assert paused["pauses"] == [{}] and "alarmRecipients" not in paused, paused
    await pos(a, 47.02)
    raised = await a.ok("alarm.raise", to=[d.username])
    assert raised.get("pauseOverridden") is True, raised
    await d.expect_event("alarm")
    await pos(a, 47.03)
    ev = await d.expect_event("pos", predicate=at(47.03))
    assert ev["from"] == a.username
    await a.sync()
    for x in (b, c, viewer):
        await x.no_event("pos", predicate=lambda e: e.get("lat") in (47.02, 47.03))
    again = await a.ok("location.pause")
    assert again["alarmRecipients"] == [d.username], again
    await b.err("friend.location", "forbidden", username=a.username)

    await a.ok("location.resume")
    await pos(a, 47.04)
    for x in (b, c, viewer, d):
        await x.expect_event("pos", predicate=at(47.04))


async def test_a_pause_from_one_friend_hides_only_from_them_and_ends_on_time(hw):
    a, b, c = await friends_of(hw, "sfa", "sfb", "sfc")
    await a.ok("share.always", **{"with": [b.username, c.username]})
    until = now_ms() + 1500
    reply = await a.ok("location.pause", **{"from": b.username, "until": until})
    assert reply["pauses"] == [{"from": b.username, "until": until}], reply
    await pos(a, 46.01)
    await c.expect_event("pos", predicate=at(46.01))
    await a.sync()
    await b.no_event("pos", predicate=at(46.01))
    ev = await a.expect_event("location.resumed", timeout=5)
    assert ev == {"type": "location.resumed", "from": b.username}, ev
    await pos(a, 46.02)
    await b.expect_event("pos", predicate=at(46.02))


async def test_a_friend_removed_mid_share_stops_receiving_within_the_same_second(hw):
    a, b = await friends_of(hw, "sra", "srb")
    await a.ok("share.always", **{"with": [b.username]})
    await pos(a, 45.01)
    await b.expect_event("pos", predicate=at(45.01))
    started = time.monotonic()
    await a.ok("friend.remove", username=b.username)
    await pos(a, 45.02)  # right after the reply
    await b.expect_event("friend.removed")
    await a.sync()
    await b.no_event("pos", predicate=at(45.02))
    assert time.monotonic() - started < 2.5
    assert (await a.ok("share.always"))["with"] == []


async def test_blocking_a_friend_ends_their_standing_share_at_once(hw):
    a, b = await friends_of(hw, "sba", "sbb")
    await a.ok("share.always", **{"with": [b.username]})
    await b.ok("user.block", username=a.username)
    await pos(a, 44.01)
    await a.sync()
    await b.no_event("pos", predicate=at(44.01))


async def test_a_position_sent_during_a_pause_is_not_shown_after_it_ends(hw):
    a, b, c = await friends_of(hw, "sda", "sdb", "sdc")
    await a.ok("share.always", **{"with": [b.username, c.username]})
    await pos(a, 43.01)
    for x in (b, c):
        await x.expect_event("pos", predicate=at(43.01))

    await a.ok("location.pause")
    await pos(a, 43.02)  # the same connection: recorded before the resume is read
    await a.ok("location.resume")
    for x in (b, c):
        located = await x.ok("friend.location", username=a.username)
        assert located["position"]["lat"] == 43.01, ("a pause from everyone hid 43.02", located)

    await a.ok("location.pause", **{"from": b.username})
    await pos(a, 43.03)
    await c.expect_event("pos", predicate=at(43.03))
    await a.ok("location.resume", **{"from": b.username})
    located = await b.ok("friend.location", username=a.username)
    assert located["position"]["lat"] == 43.01, ("the pause from bob hid 43.03 from him", located)
    assert (await c.ok("friend.location", username=a.username))["position"]["lat"] == 43.03
    await b.no_event("pos", predicate=lambda e: e.get("lat") in (43.02, 43.03))


async def test_a_new_observer_and_a_new_viewer_are_not_shown_a_position_sent_during_a_pause(hw):
    a, b = await friends_of(hw, "sna", "snb")
    sid = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    token = (await a.ok("share.create", sessionId=sid))["share"]["token"]
    await pos(a, 42.01)
    await a.ok("location.pause")
    await pos(a, 42.02)
    await a.ok("location.resume")
    await b.expect_event("session.invite")
    accepted = await b.ok("session.accept", sessionId=sid)
    assert (accepted.get("position") or {}).get("lat") == 42.01, accepted
    viewer = await hw.connect("viewer")
    watched = await viewer.request("watch", token=token)
    assert watched["type"] == "ok" and (watched.get("lastPosition") or {}).get("lat") == 42.01, watched


async def test_blocking_ends_meeting_points_and_queued_messages_between_the_two(hw):
    a, b, c = await friends_of(hw, "sea", "seb", "sec")
    when = now_ms() + 3_600_000
    both = (await a.ok("meet.propose", to=[b.username, c.username], lat=57.7, lon=11.97, name="both", time=when))["meeting"]
    only_b = (await a.ok("meet.propose", to=[b.username], lat=57.7, lon=11.97, name="bob only", time=when))["meeting"]
    for mid in (both["meetingId"], only_b["meetingId"]):
        await b.expect_event("meet", predicate=lambda e, mid=mid: e["meeting"]["meetingId"] == mid)
    await hw.go_offline(b, watcher=a)
    await a.ok("msg.send", to=b.username, text="queued before the block")

    await a.ok("user.block", username=b.username)
    listed = (await a.ok("meet.list"))["meetings"]
    assert [m["meetingId"] for m in listed] == [both["meetingId"]], listed
    assert [i["username"] for i in listed[0]["invited"]] == [c.username], listed

    b2 = await hw.login(b.username)
    assert (await b2.ok("meet.list"))["meetings"] == []
    for _ in range(10):
        await b2.err("meet.accept", "forbidden", meetingId=both["meetingId"])
    await b2.err("meet.decline", "not_found", meetingId=only_b["meetingId"])
    await b2.no_event("msg")
    await a.no_event("meet.response")
    await a.no_event("msg.delivered")


async def test_unfriending_ends_meeting_points_and_unread_messages_between_the_two(hw):
    a, b = await friends_of(hw, "sua", "sub")
    meeting = (await a.ok("meet.propose", to=[b.username], lat=57.7, lon=11.97, name="x", time=now_ms() + 3_600_000))["meeting"]
    await b.expect_event("meet")
    message = (await a.ok("msg.send", to=b.username, text="unread"))["message"]
    await b.expect_event("msg")

    await b.ok("friend.remove", username=a.username)
    for x in (a, b):
        ev = await x.expect_event("meet.cancelled")
        assert ev == {"type": "meet.cancelled", "meetingId": meeting["meetingId"]}, ev
    await b.err("msg.read", "not_found", messageId=message["messageId"])
    await b.err("meet.accept", "not_found", meetingId=meeting["meetingId"])
    assert (await a.ok("meet.list"))["meetings"] == []
    await a.no_event("msg.read")


def check_times(entry, queued_before, delivered_after):
    assert isinstance(entry["queuedAt"], int) and entry["queuedAt"] <= queued_before, entry
    assert isinstance(entry["deliveredAt"], int) and entry["deliveredAt"] >= delivered_after, entry
    assert entry["deliveredAt"] >= entry["queuedAt"], entry


async def queue_for_offline(hw, a, b):
    """b goes offline; a proposes a meeting point and sends a message. Returns (meetingId, messageId, sentAt)."""
    await hw.go_offline(b, watcher=a)
    when = now_ms() + 3_600_000
    meeting = (await a.ok("meet.propose", to=[b.username], lat=57.7, lon=11.97, name="the fountain", time=when))["meeting"]
    assert meeting["invited"][0]["username"] == b.username and "deliveredAt" not in meeting["invited"][0], meeting
    message = (await a.ok("msg.send", to=b.username, text="see you there"))["message"]
    assert "deliveredAt" not in message, message
    return meeting["meetingId"], message["messageId"], now_ms()


async def expect_queued(b2, a, mid, msgid, sent_at, back_at):
    meet = (await b2.expect_event("meet", predicate=lambda e: e["meeting"]["meetingId"] == mid))["meeting"]
    assert meet["name"] == "the fountain" and meet["from"]["username"] == a.username, meet
    check_times(meet["invited"][0], sent_at, back_at)
    msg = (await b2.expect_event("msg", predicate=lambda e: e["message"]["messageId"] == msgid))["message"]
    assert msg["text"] == "see you there" and msg["from"] == a.username, msg
    check_times(msg, sent_at, back_at)
    return meet, msg


async def test_meeting_point_and_message_to_an_offline_friend_arrive_on_reconnect_with_both_times(hw):
    a, b = await friends_of(hw, "soa", "sob")
    mid, msgid, sent_at = await queue_for_offline(hw, a, b)
    back_at = now_ms()
    b2 = await hw.login(b.username)
    await expect_queued(b2, a, mid, msgid, sent_at, back_at)
    assert (await a.expect_event("meet.delivered"))["meetingId"] == mid
    assert (await a.expect_event("msg.delivered"))["messageId"] == msgid

    await b2.ok("meet.accept", meetingId=mid)
    ev = await a.expect_event("meet.response")
    assert ev == {"type": "meet.response", "meetingId": mid, "by": b.username, "response": "accepted"}, ev
    await b2.ok("msg.read", messageId=msgid)
    ev = await a.expect_event("msg.read")
    assert ev["messageId"] == msgid and ev["by"] == b.username and isinstance(ev["readAt"], int), ev
    await b2.err("msg.read", "not_found", messageId=msgid)
    # delivered once: another device gets neither again
    b3 = await hw.another_device(b2)
    await b3.no_event("meet")
    await b3.no_event("msg")
    assert [m["meetingId"] for m in (await b3.ok("meet.list"))["meetings"]] == [mid]


async def test_a_message_to_an_online_friend_is_delivered_at_once(hw):
    a, b = await friends_of(hw, "sma", "smb")
    message = (await a.ok("msg.send", to=b.username, text="hi ✋"))["message"]
    assert isinstance(message["deliveredAt"], int), message
    ev = await b.expect_event("msg")
    assert ev["message"]["text"] == "hi ✋" and ev["message"]["messageId"] == message["messageId"], ev


@pytest.mark.slow
async def test_kill_9_loses_neither_the_meeting_point_nor_the_message(own_hw):
    hw = own_hw
    a, b = await friends_of(hw, "ska", "skb")
    await a.ok("share.always", **{"with": [b.username]})
    await a.ok("location.pause", **{"from": b.username})
    mid, msgid, sent_at = await queue_for_offline(hw, a, b)
    await hw.relay.restart_async(hard=True)
    await hw.aclose()
    back_at = now_ms()
    b2 = await hw.login(b.username)
    await expect_queued(b2, a, mid, msgid, sent_at, back_at)
    a2 = await hw.login(a.username)
    sharing = await a2.ok("share.always")
    assert sharing["with"] == [b.username] and sharing["pauses"] == [{"from": b.username}], sharing
    await pos(a2, 43.01)
    await a2.sync()
    await b2.no_event("pos", predicate=at(43.01))


async def test_messages_are_rate_limited_per_sender(hw):
    a, b = await friends_of(hw, "sla", "slb")
    for n in range(30):
        await a.ok("msg.send", to=b.username, text=f"message {n}")
    await a.err("msg.send", "rate_limited", to=b.username, text="one too many")
    await b.ok("msg.send", to=a.username, text="others still may")
    await a.sync()


BAD = [
    ("share.always", {"with": "x"}, "bad_request"),
    ("share.always", {"with": ["no such user!"]}, "bad_request"),
    ("share.always", {"with": ["OUTSIDER"]}, "forbidden"),
    ("share.always", {"with": ["SELF"]}, "bad_request"),
    ("share.always", {"with": ["nobody_here_at_all"]}, "not_found"),
    ("friend.location", {}, "bad_request"),
    ("friend.location", {"username": "OUTSIDER"}, "forbidden"),
    ("friend.location", {"username": "nobody_here_at_all"}, "not_found"),
    ("location.pause", {"until": 5}, "bad_request"),
    ("location.pause", {"until": "later"}, "bad_request"),
    ("location.pause", {"from": "OUTSIDER"}, "forbidden"),
    ("location.pause", {"from": 7}, "bad_request"),
    ("location.resume", {"from": ["x"]}, "bad_request"),
    ("meet.propose", {"to": [], "lat": 1, "lon": 2, "name": "x", "time": "SOON"}, "bad_request"),
    ("meet.propose", {"to": ["FRIEND"], "lat": 100, "lon": 2, "name": "x", "time": "SOON"}, "bad_request"),
    ("meet.propose", {"to": ["FRIEND"], "lat": 1, "lon": 2, "name": "", "time": "SOON"}, "bad_request"),
    ("meet.propose", {"to": ["FRIEND"], "lat": 1, "lon": 2, "name": "a\u202eb", "time": "SOON"}, "bad_request"),
    ("meet.propose", {"to": ["FRIEND"], "lat": 1, "lon": 2, "name": "x", "time": 1}, "bad_request"),
    ("meet.propose", {"to": ["OUTSIDER"], "lat": 1, "lon": 2, "name": "x", "time": "SOON"}, "forbidden"),
    ("meet.accept", {"meetingId": "m_nope"}, "not_found"),
    ("meet.decline", {}, "bad_request"),
    ("meet.cancel", {"meetingId": 5}, "bad_request"),
    ("msg.send", {"to": "FRIEND", "text": ""}, "bad_request"),
    ("msg.send", {"to": "FRIEND", "text": "x" * 1001}, "bad_request"),
    ("msg.send", {"to": "FRIEND", "text": "\x1b[2Jcleared"}, "bad_request"),
    ("msg.send", {"to": "FRIEND", "text": "abc\u2067def"}, "bad_request"),
    ("msg.send", {"to": "FRIEND", "text": 42}, "bad_request"),
    ("msg.send", {"to": "OUTSIDER", "text": "hi"}, "forbidden"),
    ("msg.send", {"to": "SELF", "text": "hi"}, "bad_request"),
    ("msg.read", {"messageId": "msg_nope"}, "not_found"),
]


@pytest.mark.parametrize("msg_type,fields,code", BAD, ids=[f"{t}-{c}-{i}" for i, (t, _, c) in enumerate(BAD)])
async def test_bad_input_gets_its_code_keeps_the_connection_and_stores_nothing(hw, msg_type, fields, code):
    a, friend = await friends_of(hw, "sxa", "sxb")
    outsider = await hw.register("sxo")
    names = {"OUTSIDER": outsider.username, "FRIEND": friend.username, "SELF": a.username}

    def fill(value):
        if isinstance(value, list):
            return [fill(v) for v in value]
        if value == "SOON":
            return now_ms() + 3_600_000
        return names.get(value, value) if isinstance(value, str) else value

    await a.err(msg_type, code, **{k: fill(v) for k, v in fields.items()})
    await a.sync()  # the connection stays
    sharing = await a.ok("share.always")
    assert sharing["with"] == [] and sharing["pauses"] == [], sharing
    assert (await a.ok("meet.list"))["meetings"] == []
    await friend.no_event("msg")
    await friend.no_event("meet")


async def test_sign_in_lists_the_friends_map_feature(hw):
    a = await hw.register("sfm")
    reply = await (await hw.connect("hello")).request("hello", token=a.token)
    assert "friends-map" in reply["features"] and "share" in reply["features"], reply
