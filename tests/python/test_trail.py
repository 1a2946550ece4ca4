"""The walk's trail (feature "trail"): the relay keeps each active walk's recent path in memory and shows
it to whoever starts seeing the walk (an observer's accept, a viewer's watch, `friend.trail` for alarm
recipients and reconnecting apps), leaving out every point sent while a pause hid the walker from them."""

import time

import pytest

from conftest import NO_ID


def now_ms() -> int:
    return int(time.time() * 1000)


async def friends_of(hw, owner_prefix, *prefixes):
    users = await hw.users(owner_prefix, *prefixes)
    for friend in users[1:]:
        await hw.befriend(users[0], friend)
    return users


async def walk_to(client, *lats, lon=11.5):
    """Positions about 110 m apart (never thinned), each acknowledged, so recorded before the next request."""
    for lat in lats:
        await client.ok("pos", lat=lat, lon=lon)


def trail_lats(trail):
    assert trail is not None, "no trail"
    for point in trail["points"]:
        assert isinstance(point, list) and len(point) == 3 and isinstance(point[2], int), point
    return [point[0] for point in trail["points"]]


async def test_sign_in_lists_the_trail_feature(hw):
    a = await hw.register("trf")
    again = await hw.connect("hello")
    reply = await again.request("hello", token=a.token)
    assert reply["type"] == "ok" and "trail" in reply["features"], reply


async def test_a_late_observer_gets_the_trail_in_the_accept_reply(hw):
    a, b = await friends_of(hw, "tla", "tlb")
    started = await a.ok("session.start", invite=[b.username])
    sid = started["session"]["sessionId"]
    await walk_to(a, 44.001, 44.002, 44.003)
    await b.expect_event("session.invite")
    accepted = await b.ok("session.accept", sessionId=sid)
    trail = accepted["trail"]
    assert trail["sessionId"] == sid, accepted
    assert trail_lats(trail) == [44.001, 44.002, 44.003], trail
    assert accepted["position"]["lat"] == 44.003, "the live position is the trail's last point"
    assert 0 <= trail["since"] - started["session"]["startedAt"] < 5000, ("recorded from the start", trail)
    # The app reconnecting asks again, and gets what came since.
    await walk_to(a, 44.004)
    await b.expect_event("pos", predicate=lambda e: e["lat"] == 44.004)
    again = await b.ok("friend.trail", username=a.username)
    assert again["username"] == a.username and trail_lats(again["trail"]) == [44.001, 44.002, 44.003, 44.004], again


async def test_positions_closer_than_ten_metres_are_thinned(hw):
    a, b = await friends_of(hw, "tta", "ttb")
    sid = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    for lat in (44.1, 44.10001, 44.10002, 44.1003):  # about 1 m, 2 m, then 33 m from the first
        await a.ok("pos", lat=lat, lon=11.5)
    await b.expect_event("session.invite")
    accepted = await b.ok("session.accept", sessionId=sid)
    assert trail_lats(accepted["trail"]) == [44.1, 44.1003], accepted["trail"]


async def test_a_share_link_viewer_gets_the_trail_in_the_watch_reply(hw):
    a, b = await friends_of(hw, "tva", "tvb")
    sid = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    token = (await a.ok("share.create", sessionId=sid))["share"]["token"]
    await walk_to(a, 45.001, 45.002)
    viewer = await hw.connect("viewer")
    watched = await viewer.request("watch", token=token)
    assert watched["type"] == "ok", watched
    assert watched["trail"]["sessionId"] == sid and trail_lats(watched["trail"]) == [45.001, 45.002], watched
    # A viewer is read-only: it cannot ask for trails.
    refused = await viewer.request("friend.trail", username=a.username)
    assert refused["type"] == "error" and refused["code"] == "forbidden", refused


async def test_an_alarm_recipient_gets_the_trail_by_asking_and_only_while_the_alarm_lasts(hw):
    a, b, d = await friends_of(hw, "taa", "tab", "tad")
    await a.ok("session.start", invite=[b.username])
    await walk_to(a, 46.001, 46.002)
    refused = await d.request("friend.trail", username=a.username)
    assert refused["code"] == "forbidden", ("d does not receive a's positions yet", refused)
    alarm = (await a.ok("alarm.raise", to=[d.username]))["alarm"]
    await d.expect_event("alarm")
    reply = await d.ok("friend.trail", username=a.username)
    assert trail_lats(reply["trail"]) == [46.001, 46.002], reply
    await a.ok("alarm.cancel", alarmId=alarm["alarmId"])
    await d.expect_event("alarm.cancelled")
    assert (await d.request("friend.trail", username=a.username))["code"] == "forbidden"


async def test_an_alarm_without_a_walk_has_no_trail(hw):
    a, d = await friends_of(hw, "tna", "tnd")
    await walk_to(a, 46.5)
    await a.ok("alarm.raise", to=[d.username])
    await d.expect_event("alarm")
    reply = await d.ok("friend.trail", username=a.username)
    assert reply["trail"] is None, reply


async def test_a_paused_from_friend_never_gets_the_points_sent_during_the_pause(hw):
    a, b, c, d = await friends_of(hw, "tpa", "tpb", "tpc", "tpd")
    sid = (await a.ok("session.start", invite=[b.username, c.username]))["session"]["sessionId"]
    token = (await a.ok("share.create", sessionId=sid))["share"]["token"]
    await walk_to(a, 47.001)
    await a.ok("location.pause", **{"from": b.username})
    await walk_to(a, 47.002)
    await a.ok("location.resume", **{"from": b.username})
    await a.ok("location.pause")
    await walk_to(a, 47.003)
    await a.ok("alarm.raise", to=[d.username])
    await d.expect_event("alarm")
    await walk_to(a, 47.004)  # paused from everyone, but d is an alarm recipient now
    await a.ok("location.resume")
    await walk_to(a, 47.005)

    for x in (b, c):
        await x.expect_event("session.invite")
    for_b = await b.ok("session.accept", sessionId=sid)
    assert trail_lats(for_b["trail"]) == [47.001, 47.005], ("b never sees 47.002, nor the pause from everyone", for_b)
    assert trail_lats((await b.ok("friend.trail", username=a.username))["trail"]) == [47.001, 47.005]
    for_c = await c.ok("session.accept", sessionId=sid)
    assert trail_lats(for_c["trail"]) == [47.001, 47.002, 47.005], for_c
    for_d = await d.ok("friend.trail", username=a.username)
    assert trail_lats(for_d["trail"]) == [47.001, 47.002, 47.004, 47.005], ("d: not 47.003, sent before the alarm", for_d)
    viewer = await hw.connect("viewer")
    watched = await viewer.request("watch", token=token)
    assert trail_lats(watched["trail"]) == [47.001, 47.002, 47.005], watched


async def test_while_paused_from_them_a_friend_gets_no_trail_at_all(hw):
    a, b = await friends_of(hw, "twa", "twb")
    sid = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    await walk_to(a, 47.5)
    await a.ok("location.pause", **{"from": b.username})
    await b.expect_event("session.invite")
    accepted = await b.ok("session.accept", sessionId=sid)
    assert accepted.get("trail") is None and accepted.get("position") is None, accepted
    refused = await b.request("friend.trail", username=a.username)
    assert refused["code"] == "forbidden", ("the same answer as not sharing", refused)


async def test_the_trail_is_dropped_when_the_session_ends(hw):
    a, b = await friends_of(hw, "tea", "teb")
    sid = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    await b.expect_event("session.invite")
    await b.ok("session.accept", sessionId=sid)
    await walk_to(a, 48.001, 48.002)
    await a.ok("session.end", sessionId=sid)
    await b.expect_event("session.ended")
    sid2 = (await a.ok("session.start", invite=[b.username]))["session"]["sessionId"]
    await b.expect_event("session.invite", predicate=lambda e: e["session"]["sessionId"] == sid2)
    accepted = await b.ok("session.accept", sessionId=sid2)
    assert accepted["trail"]["sessionId"] == sid2 and accepted["trail"]["points"] == [], accepted


@pytest.mark.parametrize("fields, code", [
    ({}, "bad_request"),
    ({"username": 7}, "bad_request"),
    ({"username": "NO SUCH"}, "bad_request"),
    ({"username": "nobody_here_x"}, "not_found"),
])
async def test_bad_friend_trail_requests_are_refused_and_the_connection_stays(hw, fields, code):
    a, b = await friends_of(hw, "tba", "tbb")
    reply = await b.request("friend.trail", **fields)
    assert reply["type"] == "error" and reply["code"] == code, reply
    assert (await b.request("friend.trail", username=b.username))["code"] == "bad_request", "yourself"
    assert (await b.request("friend.trail", username=a.username))["code"] == "forbidden", "a shares nothing with b"
    await b.ok("ping")


async def test_the_trail_starts_again_after_a_relay_restart(own_hw):
    hw = own_hw
    a, b = await friends_of(hw, "tra", "trb")
    started = await a.ok("session.start", invite=[b.username])
    sid = started["session"]["sessionId"]
    await b.expect_event("session.invite")
    await b.ok("session.accept", sessionId=sid)
    await walk_to(a, 49.001, 49.002)
    before = (await b.ok("friend.trail", username=a.username))["trail"]
    assert trail_lats(before) == [49.001, 49.002] and before["since"] - started["session"]["startedAt"] < 5000, before

    restarted_at = now_ms()
    await hw.relay.restart_async(hard=True)
    await hw.aclose()
    a = await hw.login(a.username)
    b = await hw.login(b.username)
    await walk_to(a, 49.003)
    await b.expect_event("pos", predicate=lambda e: e["lat"] == 49.003)
    after = (await b.ok("friend.trail", username=a.username))["trail"]
    assert after["sessionId"] == sid, after
    assert trail_lats(after) == [49.003], ("nothing from before the restart", after)
    assert after["since"] >= restarted_at > started["session"]["startedAt"], ("since says the trail starts late", after)
