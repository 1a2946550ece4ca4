"""The walk's trail across relays: the walker's relay records it, and an observer, an alarm recipient and
a share-link viewer connected to other relays get it from there, point by point as the pauses allow."""

from __future__ import annotations

from conftest import befriend_all


def lats(trail):
    assert trail is not None, "no trail"
    return [point[0] for point in trail["points"]]


async def test_observers_viewers_and_alarm_recipients_on_other_nodes_get_the_walkers_trail(hw, nodes):
    walker = await hw.register("ctrw", endpoint=nodes[0])
    bob = await hw.register("ctrb", endpoint=nodes[1])
    carol = await hw.register("ctrc", endpoint=nodes[2])
    dave = await hw.register("ctrd", endpoint=nodes[1])
    await befriend_all(hw, walker, bob, carol, dave)
    sid = (await walker.ok("session.start", invite=[bob.username, carol.username]))["session"]["sessionId"]
    token = (await walker.ok("share.create", sessionId=sid))["share"]["token"]
    await walker.ok("pos", lat=50.001, lon=11.5)
    await walker.ok("location.pause", **{"from": bob.username})
    await walker.ok("pos", lat=50.002, lon=11.5)
    await walker.ok("location.resume", **{"from": bob.username})
    await walker.ok("pos", lat=50.003, lon=11.5)

    for observer in (bob, carol):
        await observer.expect_event("session.invite")
    for_bob = await bob.ok("session.accept", sessionId=sid)
    assert lats(for_bob["trail"]) == [50.001, 50.003], (bob.node, "never the point paused from bob", for_bob)
    for_carol = await carol.ok("session.accept", sessionId=sid)
    assert lats(for_carol["trail"]) == [50.001, 50.002, 50.003], (carol.node, for_carol)
    assert for_carol["trail"]["sessionId"] == sid

    viewer = await hw.connect("viewer", endpoint=nodes[2])
    watched = await viewer.request("watch", token=token)
    assert watched["type"] == "ok" and lats(watched["trail"]) == [50.001, 50.002, 50.003], watched

    await walker.ok("alarm.raise", to=[dave.username])
    await dave.expect_event("alarm")
    await walker.ok("pos", lat=50.004, lon=11.5)
    for_dave = await dave.ok("friend.trail", username=walker.username)
    assert lats(for_dave["trail"]) == [50.001, 50.002, 50.003, 50.004], (dave.node, for_dave)
