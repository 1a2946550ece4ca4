"""Friends, user search and presence."""

import asyncio
import time

from conftest import PASSWORD, by_name, unique_username, usernames


def friend_names(reply):
    return sorted(f["username"] for f in reply["friends"])


async def test_request_accept_with_events_and_lists(hw):
    a, b = await hw.users("fra", "frb")
    await a.ok("friend.request", username=b.username)
    ev = await b.expect_event("friend.request")
    assert ev["from"] == {"username": a.username, "name": a.name}, ev

    la = await a.ok("friend.list")
    lb = await b.ok("friend.list")
    assert la["friends"] == [] and la["incoming"] == []
    assert [u["username"] for u in la["outgoing"]] == [b.username]
    assert la["outgoing"][0].get("name") == b.name
    assert lb["friends"] == [] and lb["outgoing"] == []
    assert [u["username"] for u in lb["incoming"]] == [a.username]

    await b.ok("friend.accept", username=a.username)
    ea = await a.expect_event("friend.added")
    eb = await b.expect_event("friend.added")
    assert ea["user"]["username"] == b.username and ea["user"].get("name") == b.name, ea
    assert eb["user"]["username"] == a.username and eb["user"].get("name") == a.name, eb

    la = await a.ok("friend.list")
    lb = await b.ok("friend.list")
    assert la["incoming"] == [] and la["outgoing"] == [] and lb["incoming"] == [] and lb["outgoing"] == []
    assert friend_names(la) == [b.username] and friend_names(lb) == [a.username]
    f = la["friends"][0]
    assert set(f) >= {"username", "name", "online", "lastSeen"}, f
    assert f["name"] == b.name and f["online"] is True
    assert f["lastSeen"] is None or isinstance(f["lastSeen"], int)


async def test_decline(hw):
    a, b = await hw.users("fda", "fdb")
    await a.ok("friend.request", username=b.username)
    await b.expect_event("friend.request")
    await b.ok("friend.decline", username=a.username)
    ev = await a.expect_event("friend.declined")
    assert by_name(ev["username"]) == b.username, ev
    la = await a.ok("friend.list")
    lb = await b.ok("friend.list")
    assert la["friends"] == la["outgoing"] == la["incoming"] == []
    assert lb["friends"] == lb["outgoing"] == lb["incoming"] == []
    await b.no_event("friend.added")
    # Nothing left to accept.
    await b.err("friend.accept", "not_found", username=unique_username("ghost"))


async def test_remove(hw):
    a, b = await hw.users("fma", "fmb")
    await hw.befriend(a, b)
    await a.ok("friend.remove", username=b.username)
    ev = await b.expect_event("friend.removed")
    assert by_name(ev["username"]) == a.username, ev
    assert (await a.ok("friend.list"))["friends"] == []
    assert (await b.ok("friend.list"))["friends"] == []
    # No longer friends: removing again is not_found, and sessions can't invite them.
    await a.err("friend.remove", "not_found", username=b.username)
    await a.err("session.start", "forbidden", invite=[b.username])
    # They can become friends again.
    await hw.befriend(b, a)


async def test_remove_ends_session_and_alarm_links(hw):
    a, b = await hw.users("fsa", "fsb")
    await hw.befriend(a, b)
    s = (await a.ok("session.start", invite=[b.username]))["session"]
    await b.expect_event("session.invite")
    await b.ok("session.accept", sessionId=s["sessionId"])
    await a.expect_event("session.accepted")
    await a.ok("friend.remove", username=b.username)
    await b.expect_event("friend.removed")
    # b no longer follows a, and a's positions no longer reach b.
    lb = await b.ok("session.list")
    assert all(x["sessionId"] != s["sessionId"] for x in lb["following"] + lb["invites"]), lb
    await a.request("pos", id="p", lat=10.0, lon=10.0)
    await b.no_event("pos")


async def test_mutual_request_makes_friends_at_once(hw):
    a, b = await hw.users("fua", "fub")
    await a.ok("friend.request", username=b.username)
    await b.expect_event("friend.request")
    await b.ok("friend.request", username=a.username)
    ea = await a.expect_event("friend.added")
    eb = await b.expect_event("friend.added")
    assert by_name(ea["user"]) == b.username and by_name(eb["user"]) == a.username
    la = await a.ok("friend.list")
    lb = await b.ok("friend.list")
    assert friend_names(la) == [b.username] and friend_names(lb) == [a.username]
    assert la["incoming"] == la["outgoing"] == lb["incoming"] == lb["outgoing"] == []
    # a was not sent a request that no longer exists
    assert not a.events_of("friend.request")


async def test_friend_errors(hw):
    a, b = await hw.users("fea", "feb")
    await a.err("friend.request", "not_found", username=unique_username("nobody"))
    await a.err("friend.request", "bad_request", username=a.username)
    await a.err("friend.request", "bad_request", username=a.username.upper())
    await a.ok("friend.request", username=b.username)
    await a.err("friend.request", "conflict", username=b.username)
    await b.expect_event("friend.request")
    await b.ok("friend.accept", username=a.username)
    await a.err("friend.request", "conflict", username=b.username)
    await b.err("friend.request", "conflict", username=a.username)
    await a.err("friend.accept", "not_found", username=unique_username("nobody"))
    await a.err("friend.decline", "not_found", username=unique_username("nobody"))
    await a.err("friend.remove", "not_found", username=unique_username("nobody"))
    # The failed requests changed nothing.
    assert friend_names(await a.ok("friend.list")) == [b.username]
    assert friend_names(await b.ok("friend.list")) == [a.username]


async def test_friend_request_is_case_insensitive(hw):
    a, b = await hw.users("fci", "fcj")
    await a.ok("friend.request", username=b.username.upper())
    ev = await b.expect_event("friend.request")
    assert ev["from"]["username"] == a.username
    await b.ok("friend.accept", username=a.username.upper())
    await a.expect_event("friend.added")
    assert friend_names(await a.ok("friend.list")) == [b.username]


async def test_pending_friend_request_delivered_at_login(hw):
    a, b = await hw.users("fpa", "fpb")
    await b.close()
    await a.ok("friend.request", username=b.username)
    b2 = await hw.login(b.username)
    ev = await b2.expect_event("friend.request")
    assert ev["from"]["username"] == a.username
    await b2.ok("friend.accept", username=a.username)
    await a.expect_event("friend.added")


async def test_user_search_prefix_and_limit(hw):
    prefix = unique_username("s")[:9]  # e.g. "s1a2b3c4d": unique per run
    gate = asyncio.Semaphore(3)  # registration runs a slow KDF; don't pile up

    async def reg(i):
        async with gate:
            c = await hw.register(username=f"{prefix}{i:02d}")
            if i:
                await c.close()
            return c

    clients = await asyncio.gather(*(reg(i) for i in range(22)))
    me = clients[0]
    r = await me.ok("user.search", query=prefix)
    users = r["users"]
    assert 1 <= len(users) <= 20, users
    assert all(u["username"].startswith(prefix) for u in users), users
    assert all(set(u) >= {"username", "name"} for u in users), users
    assert len({u["username"] for u in users}) == len(users)
    # A narrower prefix finds exactly the matching ones.
    r = await me.ok("user.search", query=f"{prefix}1")
    expected = {f"{prefix}{i:02d}" for i in range(10, 20)}
    assert {u["username"] for u in r["users"]} == expected, r
    r = await me.ok("user.search", query=f"{prefix}21")
    assert [u["username"] for u in r["users"]] == [f"{prefix}21"]
    # Not a substring search.
    r = await me.ok("user.search", query=prefix[1:])
    assert all(u["username"].startswith(prefix[1:]) for u in r["users"]), r
    r = await me.ok("user.search", query=unique_username("zz"))
    assert r["users"] == []


# --------------------------------------------------------------------------------------------
# Presence


def is_presence(username, online):
    return lambda e: e.get("username") == username and e.get("online") is online


async def test_presence_online_offline(hw):
    a, b = await hw.users("pra", "prb")
    await hw.befriend(a, b)
    t0 = int(time.time() * 1000)
    await b.close()
    ev = await a.expect_event("presence", predicate=is_presence(b.username, False))
    assert isinstance(ev["lastSeen"], int) and abs(ev["lastSeen"] - t0) < 60_000, ev
    lst = await a.ok("friend.list")
    f = [x for x in lst["friends"] if x["username"] == b.username][0]
    assert f["online"] is False and isinstance(f["lastSeen"], int) and abs(f["lastSeen"] - t0) < 60_000

    b2 = await hw.hello(b.token)
    ev = await a.expect_event("presence", predicate=is_presence(b.username, True))
    assert "lastSeen" in ev
    lst = await a.ok("friend.list")
    assert [x["online"] for x in lst["friends"] if x["username"] == b.username] == [True]
    await b2.close()
    await a.expect_event("presence", predicate=is_presence(b.username, False))


async def test_presence_several_devices(hw):
    a, b = await hw.users("pda", "pdb")
    await hw.befriend(a, b)
    a.drain()
    b2 = await hw.another_device(b)
    # A second connection does not announce the user again.
    await a.no_event("presence", predicate=lambda e: e.get("username") == b.username)
    # Every event for b goes to both devices.
    s = (await a.ok("session.start", invite=[b.username]))["session"]
    e1 = await b.expect_event("session.invite")
    e2 = await b2.expect_event("session.invite")
    assert e1["session"]["sessionId"] == e2["session"]["sessionId"] == s["sessionId"]
    await a.ok("friend.remove", username=b.username)
    await b.expect_event("friend.removed")
    await b2.expect_event("friend.removed")
    await hw.befriend(a, b)
    await b2.expect_event("friend.added")
    # Closing one device is not "offline"; closing the last one is.
    await b.close()
    # The relay hears of the close on b's own event loop, which may tell the actor a moment after a's
    # barrier went in: time for that.
    await a.no_event("presence", within=0.5, predicate=is_presence(b.username, False))
    await b2.close()
    await a.expect_event("presence", predicate=is_presence(b.username, False))


async def test_presence_only_to_friends(hw):
    a, b, c = await hw.users("poa", "pob", "poc")
    await hw.befriend(a, b)
    await b.close()
    await a.expect_event("presence", predicate=is_presence(b.username, False))
    await c.no_event("presence")
