"""Identity and account hardening (issue 11), checked from outside: malformed usernames at login,
text with NUL across a kill -9, the friend-request flood, blocking, device sessions, search and
registration limits. Additions to the contract are documented in docs/protocol.md."""

from __future__ import annotations

import pytest

from conftest import PASSWORD, Harness, by_name, started_relay, unique_username


async def test_login_with_nul_in_the_username_is_wrong_credentials(hw):
    k = await hw.register("kate")
    c = await hw.connect("nul")
    wrong = await c.err("login", "unauthenticated", username=k.username, password="not the password")
    for name in (k.username + "\u0000", k.username + "\u0000anything", k.username.upper() + "\u0000"):
        r = await c.err("login", "unauthenticated", username=name, password=PASSWORD)
        assert r.get("message") == wrong.get("message"), r
    await c.err("friend.list", "unauthenticated")


async def test_display_name_with_control_or_bidi_characters_is_refused(hw):
    c = await hw.connect("names")
    for name in ("Ann\u0000Evil", "Ann\u001b[31m", "\u202eAnn", "Ann\u2066"):
        await c.err("register", "bad_request", username=unique_username("nm"), password=PASSWORD, name=name)


async def test_alarm_text_with_nul_survives_a_kill_whole(own_hw):
    hw = own_hw
    a, b = await hw.users("nta", "ntb")
    await hw.befriend(a, b)
    await hw.go_offline(b, watcher=a)
    text = "help\u0000 at the bridge"
    assert (await a.ok("alarm.raise", text=text))["alarm"]["text"] == text
    await hw.relay.restart_async(hard=True)
    await hw.aclose()
    b2 = await hw.login(b.username)
    ev = await b2.expect_event("alarm")
    assert ev["alarm"]["text"] == text, ev


async def test_request_withdraw_flood_rings_once(hw):
    victim, stranger = await hw.users("flv", "fls")
    for _ in range(40):
        await stranger.ok("friend.request", username=victim.username)
        await stranger.ok("friend.remove", username=victim.username)
    await stranger.ok("friend.request", username=victim.username)
    # Awaited, not synced: in cluster mode the victim's relay hears of the request through the bus.
    await victim.expect_event("friend.request")
    await victim.no_event("friend.request")
    incoming = (await victim.ok("friend.list"))["incoming"]
    assert [by_name(u) for u in incoming] == [stranger.username]


async def test_blocked_users_request_looks_normal_and_reaches_nobody(hw):
    a, m = await hw.users("bla", "blm")
    await a.ok("user.block", username=m.username)
    assert [by_name(u) for u in (await a.ok("user.blocks"))["users"]] == [m.username]
    r = await m.ok("friend.request", username=a.username)
    assert r.get("status") == "requested", r
    await a.no_event("friend.request")
    assert (await a.ok("friend.list"))["incoming"] == []
    assert [by_name(u) for u in (await m.ok("friend.list"))["outgoing"]] == [a.username]
    await a.ok("user.unblock", username=m.username)
    await a.err("user.unblock", "not_found", username=m.username)


async def test_device_sessions_and_logout_all(hw):
    a = await hw.register("dsa")
    phone = await hw.login(a.username, label="phone")
    sessions = (await phone.ok("auth.sessions"))["sessions"]
    assert [s["current"] for s in sessions] == [False, True], sessions
    assert all(a.token not in s["id"] and phone.token not in s["id"] for s in sessions)
    await phone.ok("auth.revoke", tokenId=sessions[0]["id"])
    c = await hw.connect("revoked")
    await c.err("hello", "unauthenticated", token=a.token)
    await phone.ok("logout", all=True)
    c2 = await hw.connect("all")
    await c2.err("hello", "unauthenticated", token=phone.token)


async def test_search_shorter_than_a_username_finds_nobody(hw):
    a = await hw.register("srq")
    for query in ("", "a", a.username[:2]):
        r = await a.ok("user.search", query=query)
        assert r["users"] == [], query
    r = await a.ok("user.search", query=a.username)
    assert [u["username"] for u in r["users"]] == [a.username]


@pytest.fixture
def register_limited_relay(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("register-limited"), "--registrations-per-address", "2") as r:
        yield r


async def test_registrations_per_address_are_limited(register_limited_relay):
    hw = Harness(register_limited_relay)
    try:
        await hw.users("rga", "rgb")
        c = await hw.connect("third")
        await c.err("register", "rate_limited", username=unique_username("rgc"), password=PASSWORD)
    finally:
        await hw.aclose()


@pytest.mark.parametrize("args,env,needle", [
    (["--token-lifetime", "0"], {}, "token-lifetime"),
    (["--token-lifetime", "-3"], {}, "token-lifetime"),
    ([], {"HOMEWARD_TOKEN_LIFETIME": "soon"}, "HOMEWARD_TOKEN_LIFETIME"),
    (["--registrations-per-address", "-1"], {}, "registrations-per-address"),
    ([], {"HOMEWARD_REGISTRATIONS_PER_ADDRESS": "many"}, "HOMEWARD_REGISTRATIONS_PER_ADDRESS"),
])
def test_bad_account_limits_refuse_to_start(relay_binary, tmp_path, args, env, needle):
    import os
    import subprocess
    full_env = {**os.environ, "HOMEWARD_REGISTRATIONS_PER_ADDRESS": "", **env}
    proc = subprocess.run([relay_binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path), *args],
                          env=full_env, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0, proc
    assert needle in proc.stderr, proc.stderr
