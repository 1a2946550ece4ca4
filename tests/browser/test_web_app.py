"""The web app in a real browser (Debian's Chromium via Playwright) against a real relay, with
Python WebSocket clients playing the other people's phones."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from conftest import WEB_ARGS, Browser, Harness, befriend_page, browser_for, contract, register_in_page, started_relay

NO_ID = contract.NO_ID

START = (57.70890, 11.97460)


def step(i: int) -> dict:
    """The i-th fix of a zigzag walk north, about 11 m apart (no three fixes in a line, which a map
    may simplify away)."""
    return {"lat": START[0] + i * 0.0001, "lon": START[1] + (i % 2) * 0.0001, "acc": 12, "ts": int(time.time() * 1000)}


async def map_state(page, selector: str) -> dict:
    return await page.eval_on_selector(selector, "e => ({...e.dataset})")


async def wait_track(page, selector: str, points: int):
    await page.wait_for_function(
        "([sel, n]) => Number(document.querySelector(sel)?.dataset.trackPoints || 0) >= n", arg=[selector, points])


async def follow_walk_in_page(hw, page, browser: Browser, prefix: str):
    """A walker phone befriends the page's user, starts a walk, and the page follows it. Returns the phone."""
    username = await register_in_page(page, browser.origin, prefix, name="Bo")
    walker = await hw.register("walker", name="Ann")
    await befriend_page(hw, page, walker, username)
    reply = await walker.ok("session.start", note="Home from the station", checkInBy=int(time.time() * 1000) + 20 * 60000,
                            destination={"lat": START[0] + 0.003, "lon": START[1] + 0.003, "radius": 50})
    walker.session_id = reply["session"]["sessionId"]
    await walker.request("pos", id=NO_ID, **step(0))
    invite = f"#invites [data-session='{walker.session_id}']"
    await page.click(f"{invite} button.accept")
    await walker.expect_event("session.accepted", timeout=10)
    await page.wait_for_selector("#walk-map[data-renderer]")
    return walker, username


async def test_pages_carry_the_security_headers(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        for path in ("/", "/f", "/static/js/app.js", "/vendor/leaflet/leaflet.js"):
            response = await page.goto(browser.origin + path)
            headers = response.headers
            csp = headers.get("content-security-policy", "")
            assert response.status == 200, path
            assert "script-src 'self';" in csp and "unsafe-inline" not in csp, csp
            assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp, csp
            assert re.search(r"connect-src 'self'( wss://127\.0\.0\.1:\d+)?;", csp), csp
            assert "img-src 'self';" in csp, csp  # no tile server configured: images from the relay only
            assert headers.get("referrer-policy") == "no-referrer", headers
            assert headers.get("strict-transport-security", "").startswith("max-age="), headers
            assert headers.get("x-content-type-options") == "nosniff", headers
        response = await page.goto(browser.origin + "/static/js/app.js")
        assert response.headers["content-type"].startswith("text/javascript")
        response = await page.goto(browser.origin + "/static/css/app.css")
        assert response.headers["content-type"].startswith("text/css")
        await page.goto(browser.origin + "/")
        await page.wait_for_selector("#sign-in-form")
        await screenshots(page, "sign-in")


async def test_follower_sees_the_marker_move_and_the_track_grow(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        walker, _ = await follow_walk_in_page(hw, page, browser, "follower")
        await wait_track(page, "#walk-map", 1)
        first = await map_state(page, "#walk-map")
        assert first["renderer"] == "leaflet", first
        for i in range(1, 5):
            await walker.request("pos", id=NO_ID, **step(i))
            await wait_track(page, "#walk-map", i + 1)
        last = await map_state(page, "#walk-map")
        assert float(last["lat"]) == pytest.approx(START[0] + 0.0004) and float(last["lon"]) == pytest.approx(START[1])
        # What is drawn: Leaflet's track through all five fixes, the marker and its accuracy circle.
        track = await page.eval_on_selector("#walk-map path.track", "e => e.getAttribute('d')")
        assert track.count("L") >= 4, track
        assert await page.locator("#walk-map path.position").count() == 1
        assert await page.locator("#walk-map path.accuracy").count() == 1
        assert await page.locator("#walk-map path.destination").count() == 1
        assert await page.locator("#walk-map .leaflet-control-scale").count() == 1
        age = await page.text_content("#fix-age")
        assert re.fullmatch(r"just now|\d+ s ago", age), age
        assert re.fullmatch(r"in (20:00|19:[0-5]\d)", await page.text_content("#checkin-countdown"))
        # The map follows the walker: the marker stays in view, near the centre.
        box = await page.locator("#walk-map path.position").bounding_box()
        frame = await page.locator("#walk-map").bounding_box()
        assert abs(box["x"] + box["width"] / 2 - (frame["x"] + frame["width"] / 2)) < 40, (box, frame)
        await screenshots(page, "follow")
        # Panning away stops following until "Follow" is pressed.
        await page.mouse.move(frame["x"] + 100, frame["y"] + 100)
        await page.mouse.down()
        await page.mouse.move(frame["x"] + 250, frame["y"] + 250, steps=5)
        await page.mouse.up()
        await page.wait_for_selector("#walk-map .follow:not(.hidden)")
        assert (await map_state(page, "#walk-map"))["following"] == "false"
        await page.click("#walk-map .follow")
        assert (await map_state(page, "#walk-map"))["following"] == "true"
        # The walk list on the home screen, and lost contact shown plainly.
        await page.click("text=‹ Back")
        await page.wait_for_selector(f"#walks [data-session='{walker.session_id}']")
        await screenshots(page, "home")


async def test_an_alarm_takes_over_the_page_and_im_on_it_reaches_the_walker(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        walker, username = await follow_walk_in_page(hw, page, browser, "helper")
        reply = await walker.ok("alarm.raise", text="Someone is following me", lat=START[0], lon=START[1], acc=9)
        alarm_id = reply["alarm"]["alarmId"]
        overlay = page.locator(f"#alarm-overlay[data-alarm='{alarm_id}']")
        await overlay.wait_for()
        assert "Someone is following me" in await page.text_content("#alarm-text")
        assert "57.70890, 11.97460" in await page.text_content("#alarm-position")
        assert "Nobody has answered yet" in await page.text_content("#alarm-acks")
        # The overlay covers the whole screen.
        box = await overlay.bounding_box()
        assert box["width"] >= 389 and box["height"] >= 843, box
        await screenshots(page, "alarm")
        await page.click("#alarm-ack")
        acked = await walker.expect_event("alarm.acked", timeout=10, predicate=lambda e: e.get("alarmId") == alarm_id)
        assert acked["by"] == username
        await page.wait_for_function("name => document.querySelector('#alarm-acks').textContent.includes(name)", arg=username)
        await page.click("#alarm-ack")  # now "Close"
        await overlay.wait_for(state="detached")
        await page.click("text=‹ Back")
        await page.locator("#alarms-list .alarm-banner").wait_for()
        await walker.ok("alarm.cancel", alarmId=alarm_id, reason="safe")
        await page.locator("#alarms-list .alarm-banner").wait_for(state="detached")


async def test_walker_mode_with_faked_geolocation_reaches_a_follower(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page(geolocation={"latitude": START[0], "longitude": START[1], "accuracy": 15})
        username = await register_in_page(page, browser.origin, "walkerpage", name="Ann")
        friend = await hw.register("watcher", name="Bo")
        await befriend_page(hw, page, friend, username)
        await page.click("#share-walk")
        await page.fill("input[name=note]", "Walking home")
        await page.fill("input[name=checkin]", "30")
        await page.click("#start-sharing")
        invite = await friend.expect_event("session.invite", timeout=10)
        session = invite["session"]
        assert session["owner"]["username"] == username and session["note"] == "Walking home"
        assert session["checkInBy"] > time.time() * 1000
        accepted = await friend.ok("session.accept", sessionId=session["sessionId"])
        # In the reply, or as an event (at the latest the page's heartbeat fix: a position published while
        # the relay stores the accept reaches neither the reply nor the new observer; see docs/web.md).
        first = accepted.get("position") or await friend.expect_event("pos", timeout=15)
        assert first["lat"] == pytest.approx(START[0]) and first["lon"] == pytest.approx(START[1])
        await page.wait_for_selector("#sharing-with >> text=Followed by")
        # The phone moves: the follower gets each new fix.
        for i in range(1, 4):
            lat, lon = START[0] + i * 0.0005, START[1] + (i % 2) * 0.0005
            await page.context.set_geolocation({"latitude": lat, "longitude": lon, "accuracy": 8})
            # At once from the watch, or at the latest when the page restarts a quiet watch (10 s).
            pos = await friend.expect_event("pos", timeout=15, predicate=lambda e: e.get("lat") == pytest.approx(lat))
            assert pos["from"] == username and pos["acc"] == 8 and pos["lon"] == pytest.approx(lon)
        await wait_track(page, "#own-map", 4)
        await screenshots(page, "walker")
        # Panic asks first; cancelling sends nothing.
        await page.click("#panic")
        await page.wait_for_selector("#panic-confirm")
        await screenshots(page, "panic-confirm")
        await page.click("#panic-cancel")
        # A page that wrongly sent an alarm might still be sending it: no barrier of the friend's waits for that.
        await friend.no_event("alarm", within=0.5)
        await page.click("#panic")
        await page.fill("#panic-text", "Help, at the park")
        await page.click("#panic-send")
        alarm = await friend.expect_event("alarm", timeout=10)
        assert alarm["alarm"]["text"] == "Help, at the park"
        assert alarm["alarm"]["position"]["lat"] == pytest.approx(START[0] + 0.0015)
        await friend.ok("alarm.ack", alarmId=alarm["alarm"]["alarmId"])
        await page.wait_for_selector(f"#own-alarm-acks >> text=On it: {friend.username}")
        await page.click("text=Cancel alarm: I am safe")
        await friend.expect_event("alarm.cancelled", timeout=10)
        await page.click("#end-walk")
        ended = await friend.expect_event("session.ended", timeout=10)
        assert ended["reason"] == "ended"


async def test_the_page_shows_offline_and_reconnects_with_its_token(relay_binary, tmp_path_factory, screenshots):
    with started_relay(relay_binary, tmp_path_factory.mktemp("restart"), *WEB_ARGS) as relay:
        async with browser_for(relay) as browser:
            page = await browser.page()
            username = await register_in_page(page, browser.origin, "restart")
            await page.wait_for_selector("#connection[data-state='open']")
            await asyncio.to_thread(relay.kill)
            await page.wait_for_selector("#connection[data-state='offline']", timeout=10000)
            assert "Offline" in await page.text_content("#connection")
            await screenshots(page, "offline")
            await asyncio.to_thread(relay.start)
            # Back by itself (backoff), signed in again with `hello` and the stored token: no form shown.
            await page.wait_for_selector("#connection[data-state='open']", timeout=30000)
            await page.wait_for_selector(f"#connection >> text=@{username}")
            assert await page.locator("#sign-in-form").count() == 0
            token = await page.evaluate("localStorage.getItem('homeward.token')")
            assert token and token not in page.url


async def test_without_leaflet_the_page_draws_its_own_map_and_shows_lost_contact(relay_binary, tmp_path_factory, screenshots):
    with started_relay(relay_binary, tmp_path_factory.mktemp("no-leaflet"), *WEB_ARGS, "--leaflet-dir", "/nonexistent",
                       "--lost-contact-grace", "1") as relay:
        hw = Harness(relay)
        try:
            async with browser_for(relay) as browser:
                page = await browser.page()
                walker, _ = await follow_walk_in_page(hw, page, browser, "plain")
                for i in range(1, 4):
                    await walker.request("pos", id=NO_ID, **step(i))
                await wait_track(page, "#walk-map", 4)
                state = await map_state(page, "#walk-map")
                assert state["renderer"] == "plain", state
                points = await page.eval_on_selector("#walk-map polyline.track", "e => e.getAttribute('points')")
                assert len(points.split()) == 4, points
                assert await page.locator("#walk-map circle.position:not(.hidden)").count() == 1
                assert float(await page.eval_on_selector("#walk-map circle.accuracy", "e => e.getAttribute('r')")) > 0
                scale = await page.text_content("#walk-map .scale-text")
                assert re.fullmatch(r"\d+ (m|km)", scale), scale
                assert not [u for u in browser.requests if "/vendor/" in u]
                await screenshots(page, "follow-plain-map")
                # The walker's phone goes quiet: the page says so plainly, and again when it is back.
                token = walker.token
                await walker.close()
                await page.wait_for_selector("#contact-lost")
                assert "CONTACT LOST" in await page.text_content("#contact-lost")
                assert await page.locator("#walk-map.lost").count() == 1
                await screenshots(page, "contact-lost")
                await hw.hello(token, label="walker-back")
                await page.locator("#contact-lost").wait_for(state="detached")
        finally:
            await hw.aclose()



# A 1x1 transparent PNG: what the test's stand-in tile server answers.
TILE_PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                         "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4b60000000049454e44ae426082")


async def test_with_a_tile_server_the_map_asks_only_that_server_and_shows_its_attribution(relay_binary, tmp_path_factory):
    tiles = "https://tiles.homeward.invalid/{z}/{x}/{y}.png"
    with started_relay(relay_binary, tmp_path_factory.mktemp("tiles"), *WEB_ARGS, "--map-tiles", tiles,
                       "--map-attribution", "Tiles by the test") as relay:
        hw = Harness(relay)
        try:
            async with browser_for(relay, tile_host="tiles.homeward.invalid") as browser:
                page = await browser.page()
                # Stand in for the tile server inside the browser: no request leaves the machine.
                await page.context.route("https://tiles.homeward.invalid/**",
                                         lambda route: route.fulfill(status=200, content_type="image/png", body=TILE_PNG))
                response = await page.goto(browser.origin + "/")
                assert "img-src 'self' data: https://tiles.homeward.invalid;" in response.headers["content-security-policy"]
                walker, _ = await follow_walk_in_page(hw, page, browser, "tiles")
                await wait_track(page, "#walk-map", 1)
                assert (await map_state(page, "#walk-map"))["renderer"] == "leaflet-tiles"
                await page.wait_for_selector("#walk-map img.leaflet-tile-loaded")
                assert "Tiles by the test" in await page.text_content("#walk-map .leaflet-control-attribution")
                tile_requests = [u for u in browser.requests if "tiles.homeward.invalid" in u]
                assert tile_requests and all(u.startswith("https://tiles.homeward.invalid/17/") for u in tile_requests), tile_requests
        finally:
            await hw.aclose()
