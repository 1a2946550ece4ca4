"""Follow-me sessions."""

import time

from conftest import PASSWORD, by_name, unique_username

_UNSET = object()


def check_session(s, owner, *, invited=None, observers=None, note=_UNSET, session_id=None):
    assert isinstance(s, dict), s
    assert isinstance(s.get("sessionId"), str) and s["sessionId"], s
    if session_id is not None:
        assert s["sessionId"] == session_id, s
    assert s.get("owner") == {"username": owner.username, "name": owner.name}, s
    assert "note" in s, s
    if note is not _UNSET:
        assert s["note"] == note, s
    assert isinstance(s.get("startedAt"), int) and abs(s["startedAt"] - time.time() * 1000) < 3_600_000, s
    assert isinstance(s.get("observers"), list) and isinstance(s.get("invited"), list), s
    if invited is not None:
        assert sorted(s["invited"]) == sorted(c.username for c in invited), s
    if observers is not None:
        assert sorted(s["observers"]) == sorted(c.username for c in observers), s


async def friends_of(hw, owner, *others):
    for o in others:
        await hw.befriend(owner, o)


async def test_start_invites_all_friends_by_default(hw):
    a, b, c, d = await hw.users("ssa", "ssb", "ssc", "ssd")
    await friends_of(hw, a, b, c)
    r = await a.ok("session.start", note="walking home")
    s = r["session"]
    check_session(s, a, invited=[b, c], observers=[], note="walking home")
    for x in (b, c):
        ev = await x.expect_event("session.invite")
        check_session(ev["session"], a, invited=[b, c], note="walking home", session_id=s["sessionId"])
    await d.no_event("session.invite")
    await a.no_event("session.invite")


async def test_invite_only_friends(hw):
    a, b, c, d = await hw.users("sia", "sib", "sic", "sid")
    await friends_of(hw, a, b, c)
    # A non-friend in the list: forbidden, and no session is started.
    await a.err("session.start", "forbidden", invite=[b.username, d.username])
    own = (await a.ok("session.list"))["own"]
    assert own is None, own
    await b.no_event("session.invite")

    s = (await a.ok("session.start", invite=[b.username]))["session"]
    check_session(s, a, invited=[b], observers=[])
    await b.expect_event("session.invite")
    await c.no_event("session.invite")

    # session.invite adds friends; non-friends are forbidden.
    await a.err("session.invite", "forbidden", sessionId=s["sessionId"], invite=[d.username])
    await d.no_event("session.invite")
    await a.ok("session.invite", sessionId=s["sessionId"], invite=[c.username])
    ev = await c.expect_event("session.invite")
    check_session(ev["session"], a, session_id=s["sessionId"])
    assert c.username in ev["session"]["invited"]
    own = (await a.ok("session.list"))["own"]
    check_session(own, a, invited=[b, c], session_id=s["sessionId"])
    # Only the owner invites; unknown sessions are not_found.
    await b.err("session.invite", "forbidden", sessionId=s["sessionId"], invite=[a.username])
    await a.err("session.invite", "not_found", sessionId="no-such-session-" + unique_username("x"),
                invite=[b.username])


async def test_accept_decline_leave_events(hw):
    a, b, c, d = await hw.users("saa", "sab", "sac", "sad")
    await friends_of(hw, a, b, c, d)
    s = (await a.ok("session.start"))["session"]
    sid = s["sessionId"]
    for x in (b, c, d):
        await x.expect_event("session.invite")

    # accept: reply has the session (b observing) and the owner's position (none yet)
    r = await b.ok("session.accept", sessionId=sid)
    check_session(r["session"], a, session_id=sid)
    assert b.username in r["session"]["observers"], r
    assert "position" in r and r["position"] is None, r
    ev = await a.expect_event("session.accepted")
    assert ev["sessionId"] == sid and by_name(ev["by"]) == b.username, ev

    # after a position, the accept reply carries it
    await a.request("pos", id="p1", lat=57.7089, lon=11.9746, acc=8, ts=1763830000000)
    await b.expect_event("pos")
    r = await c.ok("session.accept", sessionId=sid)
    pos = r["position"]
    assert pos["lat"] == 57.7089 and pos["lon"] == 11.9746, r
    assert sorted(r["session"]["observers"]) == sorted([b.username, c.username]), r
    ev = await a.expect_event("session.accepted")
    assert by_name(ev["by"]) == c.username

    await d.ok("session.decline", sessionId=sid)
    ev = await a.expect_event("session.declined")
    assert ev["sessionId"] == sid and by_name(ev["by"]) == d.username, ev

    await c.ok("session.leave", sessionId=sid)
    ev = await a.expect_event("session.left")
    assert ev["sessionId"] == sid and by_name(ev["by"]) == c.username, ev
    own = (await a.ok("session.list"))["own"]
    assert own["observers"] == [b.username], own

    # accepting twice is a conflict (relay addition)
    await b.err("session.accept", "conflict", sessionId=sid)


async def test_session_errors(hw):
    a, b, c = await hw.users("sea", "seb", "sec")
    await friends_of(hw, a, b)
    await hw.befriend(b, c)
    s = (await a.ok("session.start", invite=[b.username]))["session"]
    sid = s["sessionId"]
    await a.err("session.start", "conflict")
    await a.err("session.start", "conflict", invite=[b.username])
    await b.err("session.accept", "not_found", sessionId="nope-" + unique_username("x"))
    await b.err("session.end", "forbidden", sessionId=sid)
    await c.err("session.accept", "forbidden", sessionId=sid)  # not invited
    await a.err("session.end", "not_found", sessionId="nope-" + unique_username("x"))
    await a.err("session.accept", "bad_request")
    await a.err("session.start", "bad_request", invite="not-a-list")
    # the session is still there, unchanged
    own = (await a.ok("session.list"))["own"]
    check_session(own, a, invited=[b], observers=[], session_id=sid)


async def test_end_notifies_invitees_and_allows_a_new_session(hw):
    a, b, c = await hw.users("sna", "snb", "snc")
    await friends_of(hw, a, b, c)
    sid = (await a.ok("session.start"))["session"]["sessionId"]
    await b.expect_event("session.invite")
    await c.expect_event("session.invite")
    await b.ok("session.accept", sessionId=sid)
    await a.ok("session.end", sessionId=sid)
    for x in (b, c):  # an observer and an invitee who did not answer
        ev = await x.expect_event("session.ended")
        assert ev["sessionId"] == sid and ev["reason"] == "ended", ev
    assert (await a.ok("session.list"))["own"] is None
    lb = await b.ok("session.list")
    assert lb["following"] == [] and lb["invites"] == []
    # ended sessions: no more positions to former observers
    await a.request("pos", id="p", lat=1.0, lon=2.0)
    await b.no_event("pos")
    # a new one may start
    sid2 = (await a.ok("session.start", invite=[c.username]))["session"]["sessionId"]
    assert sid2 != sid
    await c.expect_event("session.invite", predicate=lambda e: e["session"]["sessionId"] == sid2)


async def test_session_list_shape(hw):
    a, b, c = await hw.users("sla", "slb", "slc")
    await friends_of(hw, a, b)
    await hw.befriend(c, b)
    lst = await b.ok("session.list")
    assert lst["own"] is None and lst["following"] == [] and lst["invites"] == []
    sa = (await a.ok("session.start", note="n1"))["session"]
    sc = (await c.ok("session.start", note="n2"))["session"]
    await b.expect_event("session.invite", predicate=lambda e: e["session"]["sessionId"] == sa["sessionId"])
    await b.expect_event("session.invite", predicate=lambda e: e["session"]["sessionId"] == sc["sessionId"])
    lst = await b.ok("session.list")
    assert lst["own"] is None and lst["following"] == []
    assert sorted(s["sessionId"] for s in lst["invites"]) == sorted([sa["sessionId"], sc["sessionId"]])
    await b.ok("session.accept", sessionId=sa["sessionId"])
    sb = (await b.ok("session.start", invite=[a.username]))["session"]
    lst = await b.ok("session.list")
    check_session(lst["own"], b, invited=[a], session_id=sb["sessionId"])
    assert [s["sessionId"] for s in lst["following"]] == [sa["sessionId"]]
    check_session(lst["following"][0], a, observers=[b], note="n1")
    assert [s["sessionId"] for s in lst["invites"]] == [sc["sessionId"]]
    check_session(lst["invites"][0], c, invited=[b], note="n2")
    la = await a.ok("session.list")
    check_session(la["own"], a, invited=[b], observers=[b], session_id=sa["sessionId"])
    assert [s["sessionId"] for s in la["invites"]] == [sb["sessionId"]]


async def test_open_invite_delivered_at_login(hw):
    a, b = await hw.users("sba", "sbb")
    await friends_of(hw, a, b)
    await hw.go_offline(b, watcher=a)
    sid = (await a.ok("session.start"))["session"]["sessionId"]
    b2 = await hw.login(b.username)
    ev = await b2.expect_event("session.invite")
    assert ev["session"]["sessionId"] == sid
    await b2.ok("session.accept", sessionId=sid)
    await a.expect_event("session.accepted")


async def test_sessions_survive_sigkill_restart(own_hw):
    hw = own_hw
    a, b, c = await hw.users("rsa", "rsb", "rsc")
    await friends_of(hw, a, b, c)
    sid = (await a.ok("session.start", note="home"))["session"]["sessionId"]
    await b.expect_event("session.invite")
    await c.expect_event("session.invite")
    await b.ok("session.accept", sessionId=sid)
    await a.expect_event("session.accepted")

    await hw.relay.restart_async(hard=True)
    await hw.aclose()

    a = await hw.login(a.username)
    own = (await a.ok("session.list"))["own"]
    check_session(own, a, invited=[b, c], observers=[b], note="home", session_id=sid)
    assert {f["username"] for f in (await a.ok("friend.list"))["friends"]} == {b.username, c.username}
    b = await hw.login(b.username)
    lb = await b.ok("session.list")
    assert [s["sessionId"] for s in lb["following"]] == [sid], lb
    c = await hw.login(c.username)
    ev = await c.expect_event("session.invite")  # still an open invite
    assert ev["session"]["sessionId"] == sid
    # positions still flow to the observer, and only to it
    await a.ok("pos", lat=3.0, lon=4.0)
    ev = await b.expect_event("pos")
    assert ev["from"] == a.username and ev["lat"] == 3.0
    await c.no_event("pos")
    await a.ok("session.end", sessionId=sid)
    await b.expect_event("session.ended")
    await c.expect_event("session.ended")


async def test_tokens_and_accounts_survive_restart(own_hw):
    hw = own_hw
    a = await hw.register("tka")
    await hw.relay.restart_async(hard=True)
    await hw.aclose()
    b = await hw.hello(a.token)
    assert b.username == a.username
    await hw.login(a.username, PASSWORD)
