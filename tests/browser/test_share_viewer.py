"""The share-link viewer at /f#TOKEN in a real browser: protocol 1.1 share links (`share.create`,
`watch`, `share.revoke`)."""

from __future__ import annotations

import time

import pytest

from conftest import browser_for, contract

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
        await page.goto(f"{browser.origin}/f#{share['token']}")
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


@pytest.mark.parametrize("fragment", ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not a token!", ""])
async def test_a_bad_token_shows_the_clear_page(hw, screenshots, fragment):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        await page.goto(f"{browser.origin}/f#{fragment}")
        await page.wait_for_selector("#link-unavailable")
        assert "does not work" in await page.text_content("#link-unavailable h1")
        assert page.url == f"{browser.origin}/f"
        if fragment.startswith("A"):
            await screenshots(page, "share-link-unavailable")
