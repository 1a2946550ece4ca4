"""Push (protocol 1.1): Web Push to closed apps, and the operator webhook.

A push service double on 127.0.0.1 (plain HTTP; the relay runs with --push-allow-http and
--push-allow-private) records every POST. Each push is decrypted with third-party code (http_ece,
RFC 8291 aes128gcm) using the subscriber's own private key, and its VAPID token is checked with
`cryptography` (ES256 signature with the key the relay publishes, aud = the endpoint's origin, exp
within 24 h, sub = the configured contact), together with the Urgency, TTL and Topic headers
(the doubles are in push_double.py, which the cluster cases use too).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import stat
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import Harness, Relay, by_name
from push_double import SUBJECT, Browser, PushServiceDouble, Received, b64url, check_vapid, unb64url

WEBHOOK_SECRET = "webhook-test-secret"


def check_webhook(received: Received) -> dict:
    expected = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received.headers["x-homeward-signature"], expected), received.headers
    assert received.headers["content-type"] == "application/json"
    return json.loads(received.body)


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def double():
    d = PushServiceDouble()
    yield d
    d.close()


def push_flags(double: PushServiceDouble) -> list[str]:
    return ["--push-allow-http", "--push-allow-private", "--vapid-subject", SUBJECT,
            "--webhook-url", double.url("/hook"), "--webhook-secret", WEBHOOK_SECRET,
            "--max-push-subscriptions", "3", "--alarm-repeat-interval", "600"]


@pytest.fixture(scope="module")
def push_relay(relay_binary, tmp_path_factory, double):
    r = Relay(relay_binary, tmp_path_factory.mktemp("push-relay"))
    r.extra_args = push_flags(double)
    r.start()
    yield r
    r.stop()


@pytest.fixture
def phw(push_relay):
    push_relay.mark_log()
    return Harness(push_relay)


async def subscribe(client, browser: Browser) -> str:
    reply = await client.ok("push.subscribe", **browser.subscription())
    assert isinstance(reply.get("subscriptionId"), str) and reply["subscriptionId"], reply
    return reply["subscriptionId"]


def metric(relay: Relay, name: str) -> float:
    _, _, body = relay.metrics_get("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not on the metrics listener's /metrics")


def vapid_key_of(relay: Relay) -> str:
    status, _, body = relay.http_get("/v1/push/key")
    assert status == 200
    return json.loads(body)["vapidPublicKey"]


# ------------------------------------------------------------------------------ tests


async def test_relay_publishes_its_vapid_key_and_the_push_feature(phw):
    a = await phw.register("pka")
    key = vapid_key_of(phw.relay)
    assert len(unb64url(key)) == 65 and unb64url(key)[0] == 4, key
    raw = await phw.connect("raw")
    ok = await raw.request("hello", token=a.token)
    assert ok["type"] == "ok" and "push" in ok.get("features", []), ok
    assert ok["vapidPublicKey"] == key
    key_file = phw.relay.data_dir / "vapid-key.pem"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600


async def test_alarm_pushed_to_every_subscription_decrypted_by_third_party_code(phw, double):
    a, b = await phw.users("ala", "alb")
    await phw.befriend(a, b)
    phones = [Browser(double), Browser(double)]
    for phone in phones:
        await subscribe(b, phone)
    r = await a.ok("alarm.raise", text="help at the bridge")
    alarm_id = r["alarm"]["alarmId"]
    await b.expect_event("alarm")  # connected: the WebSocket event, and the pushes as well
    key = vapid_key_of(phw.relay)
    for phone in phones:
        (push,) = await double.wait_for(phone.path)
        payload = phone.decrypt(push)
        assert payload["type"] == "alarm" and payload["alarm"]["alarmId"] == alarm_id, payload
        assert payload["alarm"]["text"] == "help at the bridge"
        assert push.headers["content-encoding"] == "aes128gcm"
        assert push.headers["urgency"] == "high"
        assert int(push.headers["ttl"]) > 0
        topic = push.headers["topic"]
        assert 1 <= len(topic) <= 32 and topic in alarm_id, (topic, alarm_id)
        assert len(push.body) <= 4096
        check_vapid(push, key, f"http://127.0.0.1:{double.port}")
    (webhook,) = await double.wait_for("/hook", match=lambda h: alarm_id.encode() in h.body)
    event = check_webhook(webhook)["event"]
    assert event["type"] == "alarm" and event["alarm"]["alarmId"] == alarm_id, event


async def test_invite_and_friend_request_pushed_only_to_recipients_without_a_connection(phw, double):
    a, online, offline = await phw.users("ina", "inb", "inc")
    await phw.befriend(a, online)
    await phw.befriend(a, offline)
    online_phone, offline_phone = Browser(double), Browser(double)
    await subscribe(online, online_phone)
    await subscribe(offline, offline_phone)
    await phw.go_offline(offline, watcher=a)

    session = (await a.ok("session.start", invite=[online.username, offline.username]))["session"]
    (push,) = await double.wait_for(offline_phone.path)
    payload = offline_phone.decrypt(push)
    assert payload["type"] == "session.invite" and payload["session"]["sessionId"] == session["sessionId"], payload
    assert push.headers["urgency"] == "normal" and int(push.headers["ttl"]) > 0
    await online.expect_event("session.invite")

    stranger = await phw.register("ind")
    await stranger.ok("friend.request", username=offline.username)
    pushes = await double.wait_for(offline_phone.path, count=2)
    request = offline_phone.decrypt(pushes[1])
    assert request["type"] == "friend.request" and by_name(request["from"]) == stranger.username, request
    await stranger.ok("friend.request", username=online.username)
    await online.expect_event("friend.request")
    await asyncio.sleep(1.0)  # the absence of a push: give a wrong one time to arrive
    assert double.to(online_phone.path) == [], "a connected recipient got a push for an invite or friend request"


async def test_503_with_retry_after_then_201_delivers_once_at_the_right_time(phw, double):
    a, b = await phw.users("rta", "rtb")
    await phw.befriend(a, b)
    phone = Browser(double)
    double.script(phone.path, (503, {"Retry-After": "2"}), (201, {}))
    await subscribe(b, phone)
    await a.ok("alarm.raise")
    first, second = await double.wait_for(phone.path, count=2)
    assert (first.status, second.status) == (503, 201)
    assert 1.9 <= second.at - first.at <= 4.0, second.at - first.at
    assert phone.decrypt(first) == phone.decrypt(second)
    await asyncio.sleep(1.5)  # no third attempt after the 201
    assert len(double.to(phone.path)) == 2
    assert metric(phw.relay, "homeward_push_retried_total") >= 1
    assert metric(phw.relay, "homeward_push_sent_total") >= 1


async def test_410_removes_the_subscription(phw, double):
    a, b = await phw.users("gna", "gnb")
    await phw.befriend(a, b)
    gone, kept = Browser(double), Browser(double)
    double.script(gone.path, (410, {}))
    gone_id = await subscribe(b, gone)
    kept_id = await subscribe(b, kept)
    await a.ok("alarm.raise")
    await double.wait_for(gone.path)
    await double.wait_for(kept.path)
    deadline = time.monotonic() + 10
    while True:  # the relay forgets the subscription right after the 410 answer; poll push.list
        ids = [s["subscriptionId"] for s in (await b.ok("push.list"))["subscriptions"]]
        if gone_id not in ids or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert gone_id not in ids and kept_id in ids, ids


async def test_ack_and_cancel_reach_the_webhook_signed(phw, double):
    a, b = await phw.users("wha", "whb")
    await phw.befriend(a, b)
    alarm_id = (await a.ok("alarm.raise"))["alarm"]["alarmId"]
    await b.ok("alarm.ack", alarmId=alarm_id)
    await a.ok("alarm.cancel", alarmId=alarm_id, reason="safe now")
    hooks = await double.wait_for("/hook", count=3, match=lambda h: alarm_id.encode() in h.body)
    mine = [check_webhook(h)["event"] for h in hooks]
    assert [e["type"] for e in mine] == ["alarm", "alarm.acked", "alarm.cancelled"], mine
    assert mine[1]["by"] == b.username and mine[2]["reason"] == "safe now"


async def test_subscribe_validation_and_limits(phw, double):
    c = await phw.register("sva")
    good = Browser(double).subscription()
    await c.err("push.subscribe", "bad_request", **{**good, "kind": "apns"})
    await c.err("push.subscribe", "bad_request", **{**good, "endpoint": "ftp://127.0.0.1/x"})
    await c.err("push.subscribe", "bad_request", **{**good, "keys": {"p256dh": good["keys"]["p256dh"][:-4], "auth": good["keys"]["auth"]}})
    await c.err("push.subscribe", "bad_request", **{**good, "keys": {"p256dh": good["keys"]["p256dh"], "auth": b64url(b"short")}})
    await c.err("push.subscribe", "bad_request", kind="webpush", endpoint=good["endpoint"])
    ids = [await subscribe(c, Browser(double)) for _ in range(3)]
    await c.err("push.subscribe", "rate_limited", **Browser(double).subscription())
    await c.ok("push.unsubscribe", subscriptionId=ids[0])
    await c.err("push.unsubscribe", "not_found", subscriptionId=ids[0])
    listed = [s["subscriptionId"] for s in (await c.ok("push.list"))["subscriptions"]]
    assert listed == ids[1:], listed
    other = await phw.register("svb")
    await other.err("push.unsubscribe", "not_found", subscriptionId=ids[1])


async def test_endpoints_must_be_public_https_without_the_test_flags(hw):
    c = await hw.register("pub")
    keys = Browser.__new__(Browser)
    keys.key, keys.auth = ec.generate_private_key(ec.SECP256R1()), secrets.token_bytes(16)
    for endpoint in ("http://8.8.8.8/push", "https://127.0.0.1/push", "https://10.1.2.3/push", "https://192.168.1.1/x",
                     "https://169.254.169.254/latest", "https://[::1]/push", "https://[fe80::1]/push", "https://localhost/push"):
        keys.endpoint = endpoint
        reply = await c.err("push.subscribe", "bad_request", **keys.subscription())
        assert "endpoint" in reply["message"], reply
    keys.endpoint = "https://8.8.8.8/push/abc"
    await c.ok("push.subscribe", **keys.subscription())
    await c.ok("ping")  # the connection stayed open through every refusal


async def test_a_push_pending_at_kill_9_is_delivered_after_restart_exactly_once(relay_binary, tmp_path_factory, double):
    r = Relay(relay_binary, tmp_path_factory.mktemp("push-kill"))
    r.extra_args = push_flags(double)
    r.start()
    try:
        hw = Harness(r)
        try:
            a, b = await hw.users("kla", "klb")
            await hw.befriend(a, b)
            phone = Browser(double)
            double.script(phone.path, (503, {"Retry-After": "3"}))
            await subscribe(b, phone)
            alarm_id = (await a.ok("alarm.raise"))["alarm"]["alarmId"]
            await double.wait_for(phone.path)  # the first attempt got 503
            # The relay counts the retry once it is stored: only then is the push "pending" in the outbox
            # (killed mid-send, it would wait for the end of its 2-minute lease instead).
            deadline = time.monotonic() + 10
            while metric(r, "homeward_push_retried_total") < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert metric(r, "homeward_push_retried_total") == 1
        finally:
            await hw.aclose()
        await r.restart_async(hard=True)  # kill -9, start again on the same data dir
        pushes = await double.wait_for(phone.path, count=2, timeout=20)
        assert [p.status for p in pushes] == [503, 201]
        assert phone.decrypt(pushes[1])["alarm"]["alarmId"] == alarm_id
        await asyncio.sleep(2.0)  # no second delivery after the 201
        assert len(double.to(phone.path)) == 2
    finally:
        r.stop()
