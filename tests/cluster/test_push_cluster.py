"""Web Push across relays (issue 13): a browser subscribes with the VAPID key of the relay it reaches,
while the push may be claimed from the shared outbox and signed by any relay. With no --vapid-key the
relays keep one key in PostgreSQL, so every relay shows it and every push verifies with it."""

from __future__ import annotations

import json

from cluster import push_double
from conftest import befriend, node_back, node_killed


def vapid_key_of(node) -> str:
    status, _, body = node.http_get("/v1/push/key")
    assert status == 200, (status, body)
    return json.loads(body)["vapidPublicKey"]


async def test_every_relay_shows_one_vapid_key_at_the_url_and_in_sign_in_replies(hw, nodes):
    keys = [vapid_key_of(node) for node in nodes]
    assert len(set(keys)) == 1, dict(zip([n.node_id for n in nodes], keys))
    user = await hw.register("vkey", endpoint=nodes[0])
    for node in nodes:
        raw = await hw.connect("raw", endpoint=node)
        reply = await raw.request("hello", token=user.token)
        assert reply["type"] == "ok" and reply["vapidPublicKey"] == keys[0], (node.node_id, reply)


async def test_a_push_sent_by_another_relay_verifies_with_the_key_the_subscribers_relay_showed(hw, cluster, nodes, double):
    subscribed_on, raised_on = nodes[0], nodes[1]
    shown = vapid_key_of(subscribed_on)
    owner = await hw.register("vpo", endpoint=raised_on)
    friend = await hw.register("vpf", endpoint=subscribed_on)
    await befriend(hw, owner, friend)
    phone = push_double.Browser(double)
    await friend.ok("push.subscribe", **phone.subscription())
    await friend.close()
    try:
        # With n1 dead, n2 or n3 claims the push from the outbox and signs it.
        await node_killed(cluster, subscribed_on)
        alarm_id = (await owner.ok("alarm.raise", text="push from another relay"))["alarm"]["alarmId"]
        (push, *_) = await double.wait_for(phone.path, timeout=20)
        payload = phone.decrypt(push)
        assert payload["type"] == "alarm" and payload["alarm"]["alarmId"] == alarm_id, payload
        assert push.status == 201
        push_double.check_vapid(push, shown, f"http://127.0.0.1:{double.port}")  # raises if signed with another key
        await owner.ok("alarm.cancel", alarmId=alarm_id)
    finally:
        await node_back(cluster, subscribed_on)
