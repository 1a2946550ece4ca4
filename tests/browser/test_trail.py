"""The walk's trail in the web app (relay feature "trail"): a late follower sees the path walked so far
under the live position at once, and after a relay restart the page draws only what the relay kept since
and says on screen that the path starts late."""

from __future__ import annotations

import asyncio
import time

from conftest import WEB_ARGS, Harness, befriend_page, browser_for, contract, register_in_page, started_relay

NO_ID = contract.NO_ID
START = (57.70890, 11.97460)


def step(i: int) -> dict:
    """The i-th fix of a zigzag walk north-east, about 60 m apart: never thinned by the relay."""
    return {"lat": START[0] + i * 0.0005, "lon": START[1] + (i % 2) * 0.0004, "acc": 10, "ts": int(time.time() * 1000) + i}


async def track_points(page) -> int:
    return int(await page.eval_on_selector("#walk-map", "e => e.dataset.trackPoints || '0'"))


async def wait_track(page, points: int):
    await page.wait_for_function("n => Number(document.querySelector('#walk-map')?.dataset.trackPoints || 0) === n", arg=points)


async def walk_then_follow(hw, page, origin, prefix):
    """A phone befriends the page's user, starts a walk, walks five fixes, and only then the page follows."""
    username = await register_in_page(page, origin, prefix, name="Bo")
    walker = await hw.register("trailw", name="Ann")
    await befriend_page(hw, page, walker, username)
    started = time.monotonic()
    session_id = (await walker.ok("session.start", invite=[username], note="Home through the park"))["session"]["sessionId"]
    for i in range(5):
        await walker.ok("pos", **step(i))
    # The scenario: a walk some seconds old (a trail recorded from within 2 s of the start counts as whole).
    await asyncio.sleep(max(0.0, 3.0 - (time.monotonic() - started)))
    await page.click(f"#invites [data-session='{session_id}'] button.accept")
    await walker.expect_event("session.accepted", timeout=10)
    return walker, session_id


async def test_a_late_follower_sees_the_path_walked_so_far(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        walker, _ = await walk_then_follow(hw, page, browser.origin, "trailf")
        # All five fixes from before the page followed: the relay's trail, drawn under the live position.
        await wait_track(page, 5)
        assert await page.locator("#trail-restarted").count() == 0, "a whole trail is not announced as late"
        await walker.request("pos", id=NO_ID, **step(5))
        await wait_track(page, 6)
        assert await page.locator("#walk-map .leaflet-marker-pane, #walk-map path.position").count() >= 1
        await screenshots(page, "walk-trail")


async def test_after_a_relay_restart_the_page_draws_the_new_trail_and_says_it_starts_late(relay_binary, tmp_path_factory, screenshots):
    with started_relay(relay_binary, tmp_path_factory.mktemp("trail-restart"), *WEB_ARGS,
                       "--leaflet-dir", "/usr/share/javascript/leaflet") as relay:
        hw = Harness(relay)
        try:
            async with browser_for(relay) as browser:
                page = await browser.page()
                walker, _ = await walk_then_follow(hw, page, browser.origin, "trailr")
                await wait_track(page, 5)

                await asyncio.to_thread(relay.kill)
                await page.wait_for_selector("#connection[data-state='offline']", timeout=10000)
                await asyncio.to_thread(relay.start)
                await hw.aclose()
                walker = await hw.login(walker.username)
                await walker.ok("pos", **step(6))
                await page.wait_for_selector("#connection[data-state='open']", timeout=30000)
                # The relay kept nothing from before the restart: the five old fixes are not shown as the path.
                notice = page.get_by_role("note")
                await notice.wait_for(timeout=15000)
                assert "relay restarted" in await notice.text_content()
                await wait_track(page, 1)
                await walker.ok("pos", **step(7))
                await wait_track(page, 2)
                await screenshots(page, "walk-trail-restarted")
        finally:
            await hw.aclose()
