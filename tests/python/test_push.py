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
import json
import os
import re
import secrets
import sqlite3
import stat
import time
from contextlib import closing
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import Harness, Relay, by_name
from push_double import SUBJECT, Browser, PushServiceDouble, Received, b64url, check_vapid, unb64url

WEBHOOK_SECRET = "webhook-test-secret"


def readme_verifier():
    """The example receiver's check from deploy/README.md, run as written, so the example stays true."""
    readme = (Path(__file__).resolve().parents[2] / "deploy" / "README.md").read_text()
    section = readme.split("## Operator webhook", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "deploy/README.md", "exec"), namespace)
    return namespace["verify"]


verify_webhook = readme_verifier()


def check_webhook(received: Received) -> dict:
    assert verify_webhook(WEBHOOK_SECRET.encode(), received.headers, received.body, {}) == "new", received.headers
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


async def outbox_settled(relay: Relay, alarm_id: str | None = None, timeout: float = 10):
    """Waits until the relay's push outbox holds no entry that is due or being sent (and, given `alarm_id`,
    none of that alarm's at all): every push and webhook call queued so far has had its answer or been
    given up, so one the double has not received is not coming. Read from the relay's SQLite file, which
    a reader does not disturb (WAL); an entry a retry put off to later is not waited for."""
    path = relay.data_dir / "homeward.sqlite"
    deadline = time.monotonic() + timeout
    while True:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            (pending,) = db.execute(
                "SELECT COUNT(*) FROM push_outbox WHERE claimed_until IS NOT NULL OR next_attempt_at <= ? OR alarm_id = ?",
                (int(time.time() * 1000), alarm_id)).fetchone()
        if pending == 0:
            return
        assert time.monotonic() < deadline, f"{pending} outbox entries still due or being sent after {timeout}s"
        await asyncio.sleep(0.05)  # polling interval, not synchronisation


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
    await outbox_settled(phw.relay)  # a push queued with the request has been sent by now
    assert double.to(online_phone.path) == [], "a connected recipient got a push for an invite or friend request"


async def test_503_with_retry_after_then_201_delivers_once_at_the_right_time(phw, double):
    a, b = await phw.users("rta", "rtb")
    await phw.befriend(a, b)
    phone = Browser(double)
    double.script(phone.path, (503, {"Retry-After": "2"}), (201, {}))
    await subscribe(b, phone)
    alarm_id = (await a.ok("alarm.raise"))["alarm"]["alarmId"]
    first, second = await double.wait_for(phone.path, count=2)
    assert (first.status, second.status) == (503, 201)
    assert 1.9 <= second.at - first.at <= 4.0, second.at - first.at
    assert phone.decrypt(first) == phone.decrypt(second)
    await outbox_settled(phw.relay, alarm_id)  # nothing of the alarm is left to send: no third attempt after the 201
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
                     "https://169.254.169.254/latest", "https://[::1]/push", "https://[fe80::1]/push", "https://localhost/push",
                     # special-purpose however written: NAT64, IPv4-compatible, 6to4, site-local, 192.0.0.0/24, decimal
                     "https://[64:ff9b::a00:1]/push", "https://[64:ff9b::169.254.169.254]/x", "https://[::7f00:1]/push",
                     "https://[2002:a00:1::1]/push", "https://[fec0::1]/push", "https://192.0.0.8/push",
                     "https://2130706433/push", "https://0x7f.1/push", "https://[::ffff:7f00:1]/push"):
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
        await outbox_settled(r, alarm_id)  # nothing of the alarm is left to send: no second delivery after the 201
        assert len(double.to(phone.path)) == 2
    finally:
        r.stop()


async def test_webhook_calls_carry_a_signed_time_and_a_unique_delivery_id(phw, double):
    a, b = await phw.users("wda", "wdb")
    await phw.befriend(a, b)
    alarm_id = (await a.ok("alarm.raise"))["alarm"]["alarmId"]
    await b.ok("alarm.ack", alarmId=alarm_id)
    await a.ok("alarm.cancel", alarmId=alarm_id, reason="fine")
    hooks = await double.wait_for("/hook", count=3, match=lambda h: alarm_id.encode() in h.body)
    ids = [h.headers["x-homeward-delivery"] for h in hooks]
    assert len(set(ids)) == 3, ids
    seen: dict = {}
    for hook in hooks:
        fields = dict(item.split("=", 1) for item in hook.headers["x-homeward-signature"].split(","))
        assert fields["id"] == hook.headers["x-homeward-delivery"], hook.headers
        assert abs(int(fields["t"]) - time.time()) < 60, fields
        assert verify_webhook(WEBHOOK_SECRET.encode(), hook.headers, hook.body, seen) == "new"
    first = hooks[0]
    # The same call again is recognised; later, it is stale; any change breaks the signature.
    assert verify_webhook(WEBHOOK_SECRET.encode(), first.headers, first.body, seen) == "duplicate"
    with pytest.raises(ValueError, match="stale"):
        verify_webhook(WEBHOOK_SECRET.encode(), first.headers, first.body, {}, now=time.time() + 600)
    fields = dict(item.split("=", 1) for item in first.headers["x-homeward-signature"].split(","))
    for forged in (f"t={int(fields['t']) + 600},id={fields['id']},v1={fields['v1']}",
                   f"t={fields['t']},id=o_other,v1={fields['v1']}"):
        with pytest.raises(ValueError, match="signature"):
            verify_webhook(WEBHOOK_SECRET.encode(), {**first.headers, "x-homeward-signature": forged}, first.body, {})
    with pytest.raises(ValueError, match="signature"):
        verify_webhook(WEBHOOK_SECRET.encode(), first.headers, hooks[1].body, {})


async def alarm_and_its_webhook(relay: Relay, double, owner, **fields) -> str:
    """Raises an alarm and waits for its webhook call and until the relay has sent all its pushes: one
    that has not reached the double by then is not coming."""
    alarm_id = (await owner.ok("alarm.raise", **fields))["alarm"]["alarmId"]
    await double.wait_for("/hook", match=lambda h: alarm_id.encode() in h.body)
    await outbox_settled(relay, alarm_id)
    return alarm_id


async def test_a_subscription_ends_with_the_sign_in_that_made_it(phw, double):
    a, b = await phw.users("soa", "sob")
    await phw.befriend(a, b)
    stolen = await phw.login(b.username, label="stolen")
    phone, thief = Browser(double), Browser(double)
    phone_id = await subscribe(b, phone)
    await subscribe(stolen, thief)
    await b.ok("auth.revoke", tokenId=[s for s in (await b.ok("auth.sessions"))["sessions"] if not s["current"]][0]["id"])
    assert [s["subscriptionId"] for s in (await b.ok("push.list"))["subscriptions"]] == [phone_id]
    await alarm_and_its_webhook(phw.relay, double, a)
    assert len(double.to(phone.path)) == 1 and double.to(thief.path) == [], "the revoked sign-in's endpoint got the alarm"

    other = await phw.login(b.username, label="other")
    await other.ok("logout", all=True)
    await alarm_and_its_webhook(phw.relay, double, a)
    assert len(double.to(phone.path)) == 1, "an alarm reached an endpoint after logout {all}"
    assert double.to(thief.path) == []


async def test_an_endpoint_belongs_to_the_account_that_subscribed_it_last(phw, double):
    a, c, d = await phw.users("sha", "shc", "shd")
    await phw.befriend(a, c)
    await phw.befriend(a, d)
    shared = Browser(double)
    await subscribe(c, shared)
    await subscribe(d, shared)
    assert (await c.ok("push.list"))["subscriptions"] == []
    await alarm_and_its_webhook(phw.relay, double, a, to=[c.username])
    assert double.to(shared.path) == [], "c's alarm reached the browser d now holds"
    alarm_id = await alarm_and_its_webhook(phw.relay, double, a, to=[d.username])
    (push,) = double.to(shared.path)
    assert shared.decrypt(push)["alarm"]["alarmId"] == alarm_id


async def test_a_cancelled_alarm_is_pushed_under_the_alarms_topic(phw, double):
    a, b = await phw.users("cpa", "cpb")
    await phw.befriend(a, b)
    phone = Browser(double)
    await subscribe(b, phone)
    await phw.go_offline(b, watcher=a)
    alarm_id = (await a.ok("alarm.raise"))["alarm"]["alarmId"]
    (alarm_push,) = await double.wait_for(phone.path)
    await a.ok("alarm.cancel", alarmId=alarm_id, reason="all good")
    pushes = await double.wait_for(phone.path, count=2)
    cancelled = phone.decrypt(pushes[1])
    assert cancelled == {"type": "alarm.cancelled", "alarmId": alarm_id, "reason": "all good"}, cancelled
    assert pushes[1].headers["topic"] == alarm_push.headers["topic"], pushes[1].headers
    assert pushes[1].headers["urgency"] == "high"


async def test_the_longest_alarm_text_is_pushed_whole_within_4096_bytes(phw, double):
    a, b = await phw.users("lta", "ltb")
    await phw.befriend(a, b)
    phone = Browser(double)
    await subscribe(b, phone)
    text = "\U0001F198" * 500  # the most a text may hold: 500 characters of 4 bytes each
    alarm_id = (await a.ok("alarm.raise", text=text, lat=57.7, lon=11.9, acc=5))["alarm"]["alarmId"]
    (push,) = await double.wait_for(phone.path)
    assert len(push.body) <= 4096, len(push.body)
    alarm = phone.decrypt(push)["alarm"]
    assert alarm["alarmId"] == alarm_id and alarm["text"] == text and "textTruncated" not in alarm, alarm


async def test_an_invite_to_90_friends_is_pushed_with_the_list_trimmed(phw, double):
    owner = await phw.register("manyowner", name="\U0001F6B6" * 64)  # the longest display name, 4 bytes a character
    friends = []
    # Four at a time (the harness hashes four passwords at once): a connection waiting longer for its
    # turn could pass the relay's sign-in timeout on a busy machine.
    for chunk in range(0, 90, 4):
        friends += await phw.users(*[f"inv_with_long_n{n:03d}_" for n in range(chunk, min(chunk + 4, 90))])
    for chunk in range(0, 90, 10):
        await asyncio.gather(*(phw.befriend(owner, friend) for friend in friends[chunk:chunk + 10]))
    offline = friends[42]
    phone = Browser(double)
    await subscribe(offline, phone)
    await phw.go_offline(offline, watcher=owner)
    names = [f.username for f in friends]
    note = "\U0001F6B6" * 280  # the longest note
    session = (await owner.ok("session.start", invite=names, note=note))["session"]
    assert len(json.dumps(session, ensure_ascii=False).encode()) > 4096
    (push,) = await double.wait_for(phone.path)
    assert len(push.body) <= 4096
    invite = phone.decrypt(push)
    assert invite["type"] == "session.invite" and invite["session"]["sessionId"] == session["sessionId"], invite
    assert invite["session"]["note"] == note, "the note is kept whole; the list is what gives way"
    invited = invite["session"]["invited"]
    assert 0 < len(invited) < 90 and invited == names[:len(invited)], invited
    assert invite["session"]["invitedMore"] == 90 - len(invited), invite
