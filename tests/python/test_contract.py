"""Transport, envelope and authentication, against the wire contract (protocol.md)."""

import json
import re
import secrets
import time

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from conftest import NO_ID, PASSWORD, SERVER_HOSTNAME, unique_username


# --------------------------------------------------------------------------------------------
# Transport


async def test_subprotocol_selected_when_offered(hw):
    c = await hw.connect(subprotocols=("homeward.v1",))
    assert c.subprotocol == "homeward.v1"
    c2 = await hw.connect(subprotocols=("x-other.v9", "homeward.v1"))
    assert c2.subprotocol == "homeward.v1"
    # The subprotocol is optional: a client that does not offer it still talks.
    c3 = await hw.connect(subprotocols=None)
    assert c3.subprotocol is None
    await c3.err("friend.list", "unauthenticated")


async def test_binary_frame_refused_connection_stays_open(hw):
    c = await hw.register("bin")
    await c.send_raw(json.dumps({"type": "ping", "id": "in-binary"}).encode())
    ev = await c.expect_event("error")
    assert ev.get("code") == "unsupported", ev
    # The binary frame was not treated as a request.
    await c.sync()
    assert not c.stray_replies, c.stray_replies
    assert not c.closed
    reply = await c.ok("friend.list")
    assert reply["friends"] == []
    await hw.check_healthy()


def test_healthz(relay):
    status, _, _ = relay.http_get("/healthz")
    assert status == 200


def test_metrics_prometheus_text(relay):
    status, headers, body = relay.http_get("/metrics")
    assert status == 200
    assert headers.get("content-type", "").startswith("text/plain"), headers
    text = body.decode("utf-8")
    sample = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?\s+(-?[0-9.eE+-]+|NaN|[+-]Inf)(\s+-?\d+)?$")
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert samples, text[:2000]
    assert all(sample.match(line) for line in samples), [l for l in samples if not sample.match(l)][:5]


def test_plain_get_of_ws_path_is_426(relay):
    status, _, _ = relay.http_get("/v1/ws")
    assert status == 426


# "/" is the web app since issue 12 (a documented addition, docs/web.md); tests/browser covers it.
@pytest.mark.parametrize("path", ["/nope", "/v2/ws", "/healthz/extra", "/v1/ws/more", "/index.html"])
def test_other_paths_are_404(relay, path):
    status, _, _ = relay.http_get(path)
    assert status == 404


def test_root_serves_the_web_app_with_a_strict_policy(relay):
    status, headers, body = relay.http_get("/")
    assert status == 200
    assert headers.get("content-type", "").startswith("text/html"), headers
    assert "script-src 'self'" in headers.get("content-security-policy", ""), headers
    assert b"<script>" not in body


async def test_websocket_upgrade_on_other_path_is_refused(hw):
    relay = hw.relay
    with pytest.raises(InvalidStatus) as info:
        ws = await ws_connect(f"wss://{relay.host}:{relay.port}/elsewhere", ssl=relay.ssl_ctx,
                              server_hostname=SERVER_HOSTNAME, proxy=None, open_timeout=10)
        await ws.close()
    assert info.value.response.status_code == 404


# --------------------------------------------------------------------------------------------
# Envelope


async def test_reply_echoes_integer_and_string_ids(hw):
    c = await hw.register("ids")
    r = await c.send_and_wait(json.dumps({"type": "ping", "id": 7}), 7)
    assert r["type"] == "ok" and r["re"] == 7 and isinstance(r["re"], int)
    r = await c.send_and_wait(json.dumps({"type": "ping", "id": "abc-1"}), "abc-1")
    assert r["type"] == "ok" and r["re"] == "abc-1"
    # "7" and 7 are different ids.
    r = await c.send_and_wait(json.dumps({"type": "friend.list", "id": "7"}), "7")
    assert r["type"] == "ok" and r["re"] == "7" and isinstance(r["re"], str)
    # Errors carry `re` too.
    r = await c.send_and_wait(json.dumps({"type": "friend.request", "id": "e1", "username": c.username}), "e1")
    assert r["type"] == "error" and r["re"] == "e1" and r["code"] == "bad_request"
    assert not c.stray_replies


async def test_request_without_id_that_succeeds_gets_no_reply(hw):
    c = await hw.register("noid")
    before = len(c.received)
    await c.request("ping", id=NO_ID)
    await c.request("friend.list", id=NO_ID)
    await c.request("session.list", id=NO_ID)
    r = await c.request("ping", id="only")
    assert r["type"] == "ok" and r["re"] == "only"
    # Messages on a connection are ordered: a reply to the id-less requests would have come first.
    after = c.received[before:]
    assert after == [r], after
    assert not c.stray_replies
    assert not c.events_of("ok") and not c.events_of("error")


async def test_malformed_input_keeps_connection_and_other_clients(hw):
    c = await hw.register("bad")
    bystander = await hw.register("bys")
    for raw in ["{not json", "", "   ", "[1, 2, 3]", "42", '"a string"', "null", "true", '{"type": "ping"'
                ]:
        await c.send_raw(raw)
        ev = await c.expect_event("error")
        assert ev.get("code") == "bad_request", (raw, ev)
        assert "re" not in ev
    # Objects with an id get the error as a reply.
    r = await c.send_and_wait('{"id": 5}', 5)
    assert r["type"] == "error" and r["code"] == "bad_request", r
    r = await c.send_and_wait('{"id": 6, "type": 6}', 6)
    assert r["type"] == "error" and r["code"] == "bad_request", r
    r = await c.send_and_wait('{"id": 8, "type": null}', 8)
    assert r["type"] == "error" and r["code"] == "bad_request", r
    r = await c.send_and_wait('{"id": 9, "type": "no.such.thing"}', 9)
    assert r["type"] == "error" and r["code"] == "unsupported", r
    # ... and without an id, as an error without `re`.
    await c.send_raw('{"type": "no.such.thing"}')
    ev = await c.expect_event("error")
    assert ev.get("code") == "unsupported" and "re" not in ev, ev
    # Ill-typed fields.
    await c.err("friend.request", "bad_request", username=42)
    await c.err("friend.request", "bad_request")
    await c.err("user.search", "bad_request", query=["x"])
    # Unknown fields are ignored.
    r = await c.ok("friend.list", extra={"nested": [1, 2]}, another="x")
    assert r["friends"] == []
    assert not c.closed
    await c.sync()
    # The bystander saw nothing and still works.
    await bystander.sync()
    assert not bystander.events_of("error"), bystander.events
    await bystander.ok("friend.list")
    await hw.check_healthy()


# --------------------------------------------------------------------------------------------
# Authentication


def check_user(user, username, name=None):
    assert isinstance(user, dict), user
    assert user.get("username") == username, user
    assert user.get("name") == (name if name is not None else username), user


async def test_register_returns_user_and_token(hw):
    c = await hw.connect("reg")
    name = unique_username("reg")
    r = await c.ok("register", username=name, password=PASSWORD)
    check_user(r.get("user"), name)  # name defaults to the username
    token1 = r.get("token")
    assert isinstance(token1, str) and len(token1) >= 16
    # Now authenticated.
    r2 = await c.ok("friend.list")
    assert r2["friends"] == [] and r2["incoming"] == [] and r2["outgoing"] == []

    d = await hw.connect("reg2")
    name2 = unique_username("reg")
    r = await d.ok("register", username=name2, password=PASSWORD, name="Dee Display")
    check_user(r["user"], name2, "Dee Display")
    assert isinstance(r["token"], str) and r["token"] != token1


@pytest.mark.parametrize("username", [
    "ab", "", "a" * 33, "has space", "bang!", "émile", "sla/sh", "at@x", "tab\tx", "plus+x", 42, None,
])
async def test_register_bad_usernames(hw, username):
    c = await hw.connect("badname")
    fields = {"password": PASSWORD}
    if username is not None:
        fields["username"] = username
    await c.err("register", "bad_request", **fields)
    # still unauthenticated, still open
    await c.err("friend.list", "unauthenticated")


async def test_register_username_and_name_edges(hw):
    c = await hw.connect("edge")
    u32 = ("x_.-" + secrets.token_hex(14))[:32]
    assert len(u32) == 32
    name64 = "N" * 64
    r = await c.ok("register", username=u32, password=PASSWORD, name=name64)
    check_user(r["user"], u32, name64)
    d = await hw.connect("edge3")
    u3 = secrets.token_hex(2)[:3]
    r = await d.ok("register", username=u3, password=PASSWORD)
    check_user(r["user"], u3)
    e = await hw.connect("edgebad")
    await e.err("register", "bad_request", username=unique_username("nm"), password=PASSWORD, name="N" * 65)


async def test_usernames_are_case_insensitive_and_stored_lowercase(hw):
    mixed = "Alice_X." + secrets.token_hex(5).upper()
    lower = mixed.lower()
    c = await hw.connect("case")
    r = await c.ok("register", username=mixed, password=PASSWORD)
    assert r["user"]["username"] == lower
    d = await hw.connect("case2")
    r = await d.ok("login", username=mixed.upper(), password=PASSWORD)
    assert r["user"]["username"] == lower
    e = await hw.connect("case3")
    await e.err("register", "conflict", username=lower, password=PASSWORD)
    await e.err("register", "conflict", username=mixed.swapcase(), password=PASSWORD)


async def test_duplicate_username_conflict(hw):
    a = await hw.register("dup")
    c = await hw.connect("dup2")
    await c.err("register", "conflict", username=a.username, password="another password")
    # The original account is untouched.
    d = await hw.login(a.username, PASSWORD)
    assert d.username == a.username


async def test_password_length_rules(hw):
    c = await hw.connect("pw")
    await c.err("register", "bad_request", username=unique_username("pw"), password="x" * 7)
    await c.err("register", "bad_request", username=unique_username("pw"), password="x" * 257)
    await c.err("register", "bad_request", username=unique_username("pw"), password=12345678)
    await c.err("register", "bad_request", username=unique_username("pw"))
    u8, u256 = unique_username("pw8"), unique_username("pw256")
    await c.ok("register", username=u8, password="p" * 8)
    d = await hw.connect("pw2")
    await d.ok("register", username=u256, password="q" * 256)
    await hw.login(u8, "p" * 8)
    await hw.login(u256, "q" * 256)


async def test_wrong_password_and_unknown_user_same_code(hw):
    a = await hw.register("wp")
    c = await hw.connect("wp2")
    r1 = await c.err("login", "unauthenticated", username=a.username, password="wrong password!")
    r2 = await c.err("login", "unauthenticated", username=unique_username("nobody"), password=PASSWORD)
    assert r1["code"] == r2["code"] == "unauthenticated"
    await c.err("friend.list", "unauthenticated")
    # The connection stays usable: the right password works on it.
    r = await c.ok("login", username=a.username, password=PASSWORD)
    assert r["user"]["username"] == a.username and isinstance(r["token"], str)
    await c.ok("friend.list")


@pytest.mark.parametrize("msg_type,fields", [
    ("friend.list", {}),
    ("friend.request", {"username": "someone"}),
    ("user.search", {"query": "a"}),
    ("session.list", {}),
    ("session.start", {}),
    ("alarm.raise", {}),
    ("alarm.contacts", {}),
    ("pos", {"lat": 1.0, "lon": 2.0}),
])
async def test_everything_but_auth_requires_authentication(hw, msg_type, fields):
    c = await hw.connect("unauth")
    await c.err(msg_type, "unauthenticated", **fields)
    assert not c.closed


async def test_hello_with_token_on_new_connection(hw):
    a = await hw.register("hel", name="Hel Lo")
    b = await hw.connect("hel2")
    r = await b.ok("hello", token=a.token)
    check_user(r["user"], a.username, "Hel Lo")
    await b.ok("friend.list")
    c = await hw.connect("hel3")
    await c.err("hello", "unauthenticated", token="not-a-real-token-" + secrets.token_hex(8))
    await c.err("hello", "bad_request")


async def test_logout_revokes_token(hw):
    a = await hw.register("lo")
    await hw.hello(a.token, label="lo-other")
    await a.ok("logout")
    # The connection stays open but is unauthenticated again.
    assert not a.closed
    await a.err("friend.list", "unauthenticated")
    c = await hw.connect("lo2")
    await c.err("hello", "unauthenticated", token=a.token)
    # Password login still works, with a new token, on the same connection.
    r = await a.ok("login", username=a.username, password=PASSWORD)
    assert r["token"] != a.token
    d = await hw.connect("lo3")
    await d.ok("hello", token=r["token"])
