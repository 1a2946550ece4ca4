"""The share-link viewer at /f#TOKEN in a real browser: protocol 1.1 share links (`share.create`,
`watch`, `share.revoke`)."""

from __future__ import annotations

import time

import pytest

from conftest import browser_for, contract, register_in_page

START = (57.70890, 11.97460)


async def walker_with_link(hw):
    walker = await hw.register("sharer", name="Ann")
    reply = await walker.request("session.start", note="Late train")
    assert reply["type"] == "ok", reply
    session_id = reply["session"]["sessionId"]
    await walker.request("pos", id=contract.NO_ID, lat=START[0], lon=START[1], acc=10, ts=int(time.time() * 1000))
    share = await walker.request("share.create", sessionId=session_id, ttl=600)
    if share.get("type") == "error" and share.get("code") in ("unsupported", "bad_request"):
        pytest.skip(f"this relay has no share links yet ({share})")
    assert share["type"] == "ok", share
    return walker, session_id, share["share"]


async def test_the_viewer_shows_the_walk_and_then_that_it_ended_after_revoke(hw, screenshots):
    walker, session_id, share = await walker_with_link(hw)
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        assert share["url"] == f"{browser.origin}/f#{share['token']}", share
        await page.goto(share["url"])
        await page.wait_for_selector("#walk-map[data-track-points='1']")
        # The token left the address bar at once, and never went into a request.
        assert page.url == f"{browser.origin}/f", page.url
        assert not [u for u in browser.requests if share["token"] in u], browser.requests
        assert "Ann is walking" in await page.text_content("h1")
        for i in range(1, 4):
            await walker.request("pos", id=contract.NO_ID, lat=START[0] + i * 0.0001, lon=START[1], acc=10,
                                 ts=int(time.time() * 1000))
        await page.wait_for_selector("#walk-map[data-track-points='4']")
        await screenshots(page, "share-viewer")
        await walker.ok("share.revoke", shareId=share["shareId"])
        await page.wait_for_selector("#walk-ended")
        assert "stopped sharing" in await page.text_content("#walk-ended")
        await screenshots(page, "share-viewer-ended")


@pytest.mark.parametrize("fragment", ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not a token!", "%E0%A4%A", ""])
async def test_a_bad_token_shows_the_clear_page(hw, screenshots, fragment):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        await page.goto(f"{browser.origin}/f#{fragment}")
        await page.wait_for_selector("#link-unavailable")
        assert "does not work" in await page.text_content("#link-unavailable h1")
        assert page.url == f"{browser.origin}/f"
        if fragment.startswith("A"):
            await screenshots(page, "share-link-unavailable")


async def test_a_walker_makes_a_share_link_in_the_page_and_someone_without_an_account_opens_it(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        walker = await browser.page(geolocation={"latitude": START[0], "longitude": START[1], "accuracy": 10})
        await register_in_page(walker, browser.origin, "linker", name="Ann")
        await walker.click("#share-walk")
        await walker.click("#start-sharing")
        await walker.wait_for_selector("#end-walk")
        if await walker.locator("#create-share-link").count() == 0:
            pytest.skip("this relay has no share links yet (no 'share' in features)")
        await walker.click("#create-share-link")
        url = await walker.input_value("#share-url")
        assert url.startswith(f"{browser.origin}/f#"), url
        await screenshots(walker, "walker-share-link")
        viewer = await browser.page()
        await viewer.goto(url)
        await viewer.wait_for_selector("#walk-map[data-track-points='1']")
        assert "Ann is walking" in await viewer.text_content("h1")
        await walker.context.set_geolocation({"latitude": START[0] + 0.0005, "longitude": START[1], "accuracy": 10})
        await viewer.wait_for_selector("#walk-map[data-track-points='2']", timeout=20000)
        await walker.click("#end-walk")
        await viewer.wait_for_selector("#walk-ended")
        assert "has ended" in await viewer.text_content("#walk-ended")
