"""Share links (protocol 1.1): watching one follow-me session without an account."""

import re
import subprocess
import time

import pytest

from conftest import NO_ID, Harness, started_relay

DAY7 = 604_800


def now_ms() -> int:
    return int(time.time() * 1000)


async def walker_with_observer(hw, **start):
    """A walker with an active session that a friend follows; returns (walker, observer, sessionId)."""
    a, b = await hw.users("sha", "shb")
    await hw.befriend(a, b)
    sid = (await a.ok("session.start", invite=[b.username], **start))["session"]["sessionId"]
    await b.expect_event("session.invite")
    await b.ok("session.accept", sessionId=sid)
    return a, b, sid


async def watch(hw, token, label="viewer"):
    v = await hw.connect(label)
    return v, await v.request("watch", token=token)


async def viewer_of(hw, token, label="viewer"):
    v, reply = await watch(hw, token, label)
    assert reply["type"] == "ok", reply
    return v, reply


async def expect_ended_and_closed(v, reason, within=1.0):
    started = time.monotonic()
    ev = await v.expect_event("session.ended", timeout=within + 2)
    assert ev.get("reason") == reason, ev
    code = await v.wait_closed(timeout=within + 2)
    assert code == 1000, (code, v.close_reason)
    return time.monotonic() - started


async def test_sign_in_replies_list_the_share_feature(hw):
    a = await hw.register("shf")
    login = await hw.connect("login")
    reply = await login.request("login", username=a.username, password=a.password)
    hello = await hw.connect("hello")
    reply2 = await hello.request("hello", token=a.token)
    for r in (reply, reply2):
        assert r["type"] == "ok", r
        assert isinstance(r.get("features"), list) and "share" in r["features"], r


async def test_create_gives_a_url_safe_token_shown_once_and_list_hides_it(hw):
    a, _, sid = await walker_with_observer(hw)
    before = now_ms()
    share = (await a.ok("share.create", sessionId=sid))["share"]
    assert isinstance(share.get("shareId"), str) and share["shareId"], share
    token = share["token"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22,}", token), token  # >= 128 bits, base64url
    assert share["url"].startswith("https://") and share["url"].endswith("/f#" + token), share
    assert before + 7200_000 <= share["expiresAt"] <= now_ms() + 7200_000, share
    other = (await a.ok("share.create", sessionId=sid, ttl=60))["share"]
    assert other["token"] != token
    listed = (await a.ok("share.list"))["shares"]
    assert [s["shareId"] for s in listed] == [share["shareId"], other["shareId"]], listed
    for s in listed:
        assert "token" not in s and "url" not in s, s
        assert s["sessionId"] == sid and isinstance(s["expiresAt"], int), s


@pytest.mark.parametrize("ttl", [59, DAY7 + 1, 60.5, "600", True, 0, -60])
async def test_ttl_out_of_range_or_not_an_integer_is_bad_request(hw, ttl):
    a, _, sid = await walker_with_observer(hw)
    await a.err("share.create", "bad_request", sessionId=sid, ttl=ttl)
    assert (await a.ok("share.list"))["shares"] == [], "nothing was created"


async def test_ttl_limits_are_inclusive_and_clamped_to_the_session_end(hw):
    a, _, sid = await walker_with_observer(hw, ttl=600)
    session_end = (await a.ok("session.list"))["own"]["expiresAt"]
    assert (await a.ok("share.create", sessionId=sid, ttl=60))["share"]["expiresAt"] <= now_ms() + 60_000
    longest = (await a.ok("share.create", sessionId=sid, ttl=DAY7))["share"]
    assert longest["expiresAt"] == session_end, (longest, session_end)


async def test_only_the_owner_of_an_active_session_creates_and_revokes(hw):
    a, b, sid = await walker_with_observer(hw)
    await b.err("share.create", "forbidden", sessionId=sid)
    await a.err("share.create", "not_found", sessionId="s_nope")
    share = (await a.ok("share.create", sessionId=sid))["share"]
    await b.err("share.revoke", "forbidden", shareId=share["shareId"])
    await a.err("share.revoke", "not_found", shareId="sh_nope")
    await a.err("share.create", "bad_request")
    anon = await hw.connect("anon")
    await anon.err("share.create", "unauthenticated", sessionId=sid)
    # The link still works: the refused revoke changed nothing.
    await viewer_of(hw, share["token"])


async def test_viewer_sees_the_session_and_the_owners_positions_only(hw):
    a, b, sid = await walker_with_observer(hw, destination={"lat": 10.0, "lon": 10.0, "radius": 50})
    await a.request("pos", lat=57.7, lon=11.9, ts=now_ms())
    await b.expect_event("pos")
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v, reply = await viewer_of(hw, share["token"])
    s = reply["session"]
    assert s["sessionId"] == sid and s["owner"] == {"username": a.username, "name": a.name}, s
    assert s["expiresAt"] == share["expiresAt"] and isinstance(s["startedAt"], int), s
    assert s["destination"] == {"lat": 10.0, "lon": 10.0, "radius": 50}, s
    assert "observers" not in s and "note" not in s, s
    assert reply["lastPosition"]["lat"] == 57.7, reply
    await a.request("pos", lat=57.71, lon=11.91, ts=now_ms())
    ev = await v.expect_event("pos")
    assert ev["from"] == a.username and ev["lat"] == 57.71, ev
    # The observer's own positions are not the walk's.
    await b.request("pos", lat=1.0, lon=1.0, ts=now_ms())
    await v.no_event("pos", predicate=lambda e: e.get("from") == b.username)


async def test_a_viewer_is_read_only_and_stays_connected(hw):
    a, _, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v, _ = await viewer_of(hw, share["token"])
    for msg_type, fields in [("friend.list", {}), ("pos", {"lat": 1, "lon": 2}), ("session.list", {}),
                             ("share.create", {"sessionId": sid}), ("hello", {"token": "x"}),
                             ("watch", {"token": share["token"]}), ("no.such.type", {})]:
        await v.err(msg_type, "forbidden", **fields)
    assert not v.closed
    await a.request("pos", lat=3.0, lon=4.0, ts=now_ms())
    assert (await v.expect_event("pos"))["lat"] == 3.0


async def test_revoke_ends_viewers_with_revoked_and_close_1000_within_a_second(hw):
    a, b, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v1, _ = await viewer_of(hw, share["token"], "v1")
    v2, _ = await viewer_of(hw, share["token"], "v2")
    started = time.monotonic()
    await a.ok("share.revoke", shareId=share["shareId"])
    for v in (v1, v2):
        ev = await v.expect_event("session.ended", timeout=2)
        assert ev == {"type": "session.ended", "sessionId": sid, "reason": "revoked"}, ev
        assert await v.wait_closed(timeout=2) == 1000
    assert time.monotonic() - started < 1.0
    assert (await a.ok("share.list"))["shares"] == []
    await b.no_event("session.ended")  # the session itself goes on
    await a.err("share.revoke", "not_found", shareId=share["shareId"])


async def test_session_end_ends_its_viewers_with_the_same_reason(hw):
    a, b, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v, _ = await viewer_of(hw, share["token"])
    await a.ok("session.end", sessionId=sid)
    await expect_ended_and_closed(v, "ended")
    again, reply = await watch(hw, share["token"], "again")
    assert reply["type"] == "error" and reply["code"] == "not_found", reply


async def test_viewer_gets_the_owners_alarm_ack_and_cancel(hw):
    a, b, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v, _ = await viewer_of(hw, share["token"])
    alarm = (await a.ok("alarm.raise", text="help"))["alarm"]
    assert (await v.expect_event("alarm"))["alarm"]["alarmId"] == alarm["alarmId"]
    await b.expect_event("alarm")
    await b.ok("alarm.ack", alarmId=alarm["alarmId"])
    ack = await v.expect_event("alarm.acknowledged")
    assert ack == {"type": "alarm.acknowledged", "alarmId": alarm["alarmId"], "by": b.username}, ack
    await a.ok("alarm.cancel", alarmId=alarm["alarmId"])
    assert (await v.expect_event("alarm.cancelled"))["alarmId"] == alarm["alarmId"]


async def test_a_viewer_hears_only_alarms_raised_while_its_link_lives(hw):
    a, b, sid = await walker_with_observer(hw)
    early = (await a.ok("alarm.raise", text="before the link"))["alarm"]
    await b.expect_event("alarm", predicate=lambda e: e["alarm"]["alarmId"] == early["alarmId"])
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v, _ = await viewer_of(hw, share["token"])
    await v.no_event("alarm")
    later = (await a.ok("alarm.raise", text="during the walk"))["alarm"]
    assert (await v.expect_event("alarm"))["alarm"]["alarmId"] == later["alarmId"]

    v2, _ = await viewer_of(hw, share["token"], "viewer2")
    assert (await v2.expect_event("alarm"))["alarm"]["alarmId"] == later["alarmId"]
    await v2.no_event("alarm", predicate=lambda e: e["alarm"]["alarmId"] == early["alarmId"])
    await a.ok("alarm.cancel", alarmId=early["alarmId"])
    await b.expect_event("alarm.cancelled", predicate=lambda e: e["alarmId"] == early["alarmId"])
    await v.no_event("alarm.cancelled")


async def test_a_viewer_never_gets_an_alarms_position_and_a_pause_from_everyone_hides_the_walker(hw):
    a, b, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    v, _ = await viewer_of(hw, share["token"])
    await a.ok("location.pause")  # from everyone: viewers included
    raised = (await a.ok("alarm.raise", text="help", lat=57.8, lon=11.8))["alarm"]
    got = await b.expect_event("alarm", predicate=lambda e: e["alarm"]["alarmId"] == raised["alarmId"])
    assert got["alarm"]["position"]["lat"] == 57.8, ("a recipient gets it whatever the pauses", got)
    ev = await v.expect_event("alarm", predicate=lambda e: e["alarm"]["alarmId"] == raised["alarmId"])
    assert ev["alarm"].get("position") is None and ev["alarm"]["text"] == "help", ev
    await a.request("pos", id=NO_ID, lat=57.81, lon=11.81)
    await b.expect_event("pos", predicate=lambda e: e.get("lat") == 57.81)
    await a.sync()  # its position went out to every loop
    await v.no_event("pos")

    v2, _ = await viewer_of(hw, share["token"], "viewer2")
    backlog = await v2.expect_event("alarm")
    assert backlog["alarm"]["alarmId"] == raised["alarmId"] and backlog["alarm"].get("position") is None, backlog


async def test_unknown_and_revoked_tokens_get_the_same_not_found_and_1008(hw):
    a, _, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    await a.ok("share.revoke", shareId=share["shareId"])
    answers = []
    for token in ("A" * 43, share["token"]):
        v, reply = await watch(hw, token)
        assert reply["type"] == "error" and reply["code"] == "not_found", reply
        answers.append(reply["message"])
        assert await v.wait_closed() == 1008
    assert answers[0] == answers[1]
    # A malformed watch is a bad request like any other, not a failed token.
    v = await hw.connect("bad")
    await v.err("watch", "bad_request")
    assert not v.closed


async def test_a_signed_in_connection_cannot_watch(hw):
    a, _, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    await a.err("watch", "forbidden", token=share["token"])
    assert not a.closed


# ---------------------------------------------------------------------------------------------
# Relays of their own: shorter link lifetimes (a test-only setting), a low failure limit, restarts.


@pytest.fixture
def short_ttl_relay(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("share-short"), "--share-min-ttl", "1",
                       "--watch-failures-per-address", "3", "--public-url", "https://watch.example/") as r:
        yield r


@pytest.fixture
def short_hw(short_ttl_relay):
    """A harness on that relay; the suite's hook closes its clients after the test."""
    short_ttl_relay.mark_log()
    return Harness(short_ttl_relay)


async def test_expiry_ends_viewers_and_the_expired_token_is_not_found(short_hw):
    hw = short_hw
    a, b, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid, ttl=2))["share"]
    assert share["url"] == "https://watch.example/f#" + share["token"], share  # --public-url, trailing / dropped
    v, _ = await viewer_of(hw, share["token"])
    ev = await v.expect_event("session.ended", timeout=6)
    assert ev == {"type": "session.ended", "sessionId": sid, "reason": "expired"}, ev
    assert now_ms() >= share["expiresAt"]
    assert await v.wait_closed(timeout=2) == 1000
    late, reply = await watch(hw, share["token"], "late")
    assert reply["code"] == "not_found", reply
    assert await late.wait_closed() == 1008
    await b.no_event("session.ended")  # only the link expired (its timer has fired: v heard it)


async def test_failed_watch_attempts_are_rate_limited_per_address(short_hw):
    hw = short_hw
    a, _, sid = await walker_with_observer(hw)
    share = (await a.ok("share.create", sessionId=sid))["share"]
    for n in range(3):
        v, reply = await watch(hw, f"guess-{n}")
        assert reply["code"] == "not_found", reply
        await v.wait_closed()
    # Over the limit even a valid token is refused: guessing gains nothing.
    v, reply = await watch(hw, share["token"])
    assert reply["type"] == "error" and reply["code"] == "rate_limited", reply
    assert await v.wait_closed() == 1008
    # Account holders are not affected.
    assert (await a.ok("share.list"))["shares"]


async def test_links_survive_kill_9_and_expiry_fires_after_the_restart(short_hw):
    hw = short_hw
    a, b, sid = await walker_with_observer(hw)
    lasting = (await a.ok("share.create", sessionId=sid))["share"]
    brief = (await a.ok("share.create", sessionId=sid, ttl=20))["share"]
    v, _ = await viewer_of(hw, lasting["token"])
    await hw.relay.restart_async(hard=True)
    assert await v.wait_closed() in (1006, 1001)
    await hw.aclose()

    a = await hw.login(a.username)
    v, reply = await viewer_of(hw, lasting["token"])
    assert reply["session"]["sessionId"] == sid
    short, _ = await viewer_of(hw, brief["token"], "short")
    await a.request("pos", lat=5.0, lon=6.0, ts=now_ms())
    assert (await v.expect_event("pos"))["lat"] == 5.0
    # The timer of the brief link was re-armed from storage.
    remaining = (brief["expiresAt"] - now_ms()) / 1000
    ev = await short.expect_event("session.ended", timeout=max(remaining, 0) + 5)
    assert ev["reason"] == "expired", ev
    assert await short.wait_closed() == 1000
    assert not v.closed
    assert [s["shareId"] for s in (await a.ok("share.list"))["shares"]] == [lasting["shareId"]]


@pytest.mark.parametrize("url", ["ftp://relay.example", "relay.example", "https://"])
def test_public_url_must_be_an_http_url(relay_binary, tmp_path, url):
    run = subprocess.run([relay_binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path),
                          "--public-url", url], capture_output=True, timeout=60)
    assert run.returncode != 0
    assert b"public-url" in run.stderr + run.stdout
