"""The friends' map in a real browser (Debian's Chromium via Playwright) against a real relay: friends
who share at all times, choosing whom you share with and pausing, meeting points, messages, and the
app being installable. Python WebSocket clients play the friends' phones.

The pages are found by what a person sees (roles, labels, visible text), so restyling does not break
the tests. Names, meeting-point names and messages carry markup, a right-to-left mark, Hebrew and
emoji with a zero-width joiner: each must show exactly as typed, as text, never as markup.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import pytest

from conftest import (CHROMIUM, PHONE, WEB_ARGS, Harness, befriend_page, browser_for, contract, register_in_page, relay_key_hashes,
                      started_relay)

NO_ID = contract.NO_ID
HERE = (57.70890, 11.97460)
# Markup, a right-to-left mark (U+200F), Hebrew and an emoji built with a zero-width joiner.
HOSTILE_NAME = "<b>Ann</b> \u200fשלום 🚶\u200d♀️"
HOSTILE_PLACE = "<img src=x onerror=alert(1)> \u200fcafé 🎉"
HOSTILE_TEXT = "<script>alert(1)</script> \u200fמה נשמע? 👋🏽 & <i>you</i>"
AGE = re.compile(r"just now|\d+ s ago")


def fix(i: int = 0) -> dict:
    return {"lat": HERE[0] + i * 0.0003, "lon": HERE[1] + i * 0.0002, "acc": 10, "ts": int(time.time() * 1000)}


async def friends_with_page(hw: Harness, page, username: str, *people: tuple[str, str]):
    """Phones (prefix, display name), each befriended with the page's user."""
    phones = []
    for prefix, name in people:
        phone = await hw.register(prefix, name=name)
        await befriend_page(hw, page, phone, username)
        phones.append(phone)
    return phones


async def open_map(page):
    await page.get_by_role("button", name=re.compile("Friends’ map")).click()
    await page.get_by_role("heading", name="Friends’ map").wait_for()
    await page.wait_for_selector("#friends-map[data-renderer]")


def sharers(page):
    return page.get_by_role("list", name="Friends sharing with you").get_by_role("listitem")


async def assert_no_markup(page):
    """Nothing a friend typed became an element."""
    assert await page.locator("#view b, #view img:not(.leaflet-tile), #view script, #view i").count() == 0


async def test_the_map_shows_friends_who_share_live_and_drops_one_who_stops_or_blocks(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        username = await register_in_page(page, browser.origin, "mapper", name="Mo")
        ann, bob = await friends_with_page(hw, page, username, ("ann", HOSTILE_NAME), ("bob", "Bob"))
        for i, phone in enumerate((ann, bob)):
            await phone.ok("share.always", **{"with": [username]})
            await phone.request("pos", id=NO_ID, **fix(i * 3))
        await page.get_by_role("button", name=re.compile("2 sharing with you")).wait_for()
        await open_map(page)
        await sharers(page).nth(1).wait_for()
        assert await sharers(page).count() == 2
        # Each with the name exactly as given, and the age of the last fix; on the map too.
        ann_item = sharers(page).filter(has=page.get_by_text(HOSTILE_NAME, exact=True))
        assert AGE.fullmatch((await ann_item.locator("[data-ago]").text_content()).strip())
        await page.wait_for_function("() => document.querySelector('#friends-map').dataset.friends === '2'")
        assert await page.locator("#friends-map").get_by_text(HOSTILE_NAME, exact=True).count() == 1
        await assert_no_markup(page)

        # Tap a friend: the details, asked afresh with friend.location, follow each new fix.
        await ann_item.get_by_role("button").click()
        details = page.get_by_role("region", name=re.compile("Ann"))
        await details.wait_for()
        assert "57.70890, 11.97460" in await details.text_content()
        await ann.request("pos", id=NO_ID, **fix(1))
        await details.get_by_text("57.70920, 11.97480").wait_for()
        await screenshots(page, "friends-map")

        # Bob stops sharing: gone from the list and the map at once (the event, no polling).
        await bob.ok("share.always", **{"with": []})
        await sharers(page).filter(has_text="Bob").wait_for(state="detached", timeout=2000)
        await page.wait_for_function("() => document.querySelector('#friends-map').dataset.friends === '1'", timeout=2000)
        # Ann blocks the page's user: she is gone at once too, details and all.
        await ann.ok("user.block", username=username)
        await sharers(page).first.wait_for(state="detached", timeout=2000)
        await details.wait_for(state="detached", timeout=2000)
        await page.locator("#friends-map").get_by_text(HOSTILE_NAME, exact=True).wait_for(state="detached", timeout=2000)
        await page.get_by_text("No friend shares their location with you at all times.").wait_for()


async def test_choosing_whom_to_share_with_and_pausing_with_the_time_left(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page(geolocation={"latitude": HERE[0], "longitude": HERE[1], "accuracy": 12})
        username = await register_in_page(page, browser.origin, "sharer", name="Sam")
        carl, dina = await friends_with_page(hw, page, username, ("carl", "Carl"), ("dina", "Dina"))
        await open_map(page)
        await page.get_by_role("button", name="Who sees me").click()

        # Share with Carl only: he hears so, and gets the page's positions (no walk needed).
        share = page.get_by_role("region", name="Share my location at all times with")
        await share.get_by_role("checkbox", name=re.compile("Carl")).check()
        await share.get_by_role("button", name="Save").click()
        sharing = await carl.expect_event("friend.sharing", timeout=10)
        assert sharing == {"type": "friend.sharing", "username": username, "sharing": True}
        pos = await carl.expect_event("pos", timeout=15, predicate=lambda e: e.get("from") == username)
        assert pos["lat"] == pytest.approx(HERE[0])
        await dina.no_event("friend.sharing")  # the same request told Carl, who has heard

        # Pause for chosen friends (Carl) for an hour: the banner says for whom and how long is left.
        form = page.get_by_role("form", name="Pause my location")
        await form.get_by_label("Chosen friends").check()
        await form.get_by_role("checkbox", name=re.compile("Carl")).check()
        await form.get_by_label("For").select_option(label="1 hour")
        await form.get_by_role("button", name="Pause").click()
        banner = page.get_by_role("status").filter(has_text="Location paused for Carl")
        await banner.wait_for()
        assert re.search(r"ends in (1:00:00|59:[0-5]\d)", await banner.text_content()), await banner.text_content()
        await carl.err("friend.location", "forbidden", username=username)  # a pause looks like not sharing

        # And for everyone until a time chosen in the form (local time of the page: Europe/Stockholm).
        until = datetime.now(ZoneInfo("Europe/Stockholm")) + timedelta(minutes=90)
        await form.get_by_label("Everyone").check()
        await form.get_by_label("For").select_option(label="until a time…")
        await form.get_by_label("pause until").fill(until.strftime("%Y-%m-%dT%H:%M"))
        await form.get_by_role("button", name="Pause").click()
        everyone = page.get_by_role("status").filter(has_text="Location paused for everyone")
        await everyone.wait_for()
        assert re.search(r"ends in 1:(2\d|30):[0-5]\d", await everyone.text_content()), await everyone.text_content()
        await screenshots(page, "sharing-paused")

        # The pauses stay in sight on the home screen, where they can be ended.
        await page.get_by_role("button", name="‹ Map").click()
        await page.get_by_role("button", name="‹ Back").click()
        await page.get_by_role("status").filter(has_text="Location paused for everyone").wait_for()
        await page.get_by_role("button", name="Resume", exact=True).click()
        await everyone.wait_for(state="detached")
        await page.get_by_role("button", name="Resume for Carl").click()
        await banner.wait_for(state="detached")
        located = await carl.ok("friend.location", username=username)
        assert located["username"] == username

        # A walk is on: the map says who still sees the walker, and why.
        await page.click("#share-walk")
        await page.click("#start-sharing")
        invite = await dina.expect_event("session.invite", timeout=10)
        await dina.ok("session.accept", sessionId=invite["session"]["sessionId"])
        await page.get_by_role("button", name="‹ Back").click()
        await open_map(page)
        who = page.get_by_role("region", name=re.compile("who sees you"))
        await who.get_by_text("Dina").wait_for()
        assert "Carl (at all times)" in await who.text_content()
        assert "Dina (follows your walk)" in await who.text_content()
        await screenshots(page, "friends-map-walk")

        # Paused for everyone, nobody sees the walk; an alarm's recipients see it whatever the pause.
        await page.get_by_role("button", name="Who sees me").click()
        await form.get_by_label("Everyone").check()
        await form.get_by_label("For").select_option(label="until I resume")
        await form.get_by_role("button", name="Pause").click()
        await everyone.wait_for()
        assert "until you resume" in await everyone.text_content()
        await page.get_by_role("button", name="‹ Map").click()
        await who.get_by_text("Nobody sees your position right now.").wait_for()
        await page.get_by_role("button", name="‹ Back").click()
        await page.click("#share-walk")
        await page.click("#panic")
        await page.click("#panic-send")
        await dina.expect_event("alarm", timeout=10)
        await page.get_by_role("button", name="‹ Back").click()
        await open_map(page)
        await who.get_by_text("Dina").wait_for()
        text = await who.text_content()
        assert "Carl (your alarm, even while paused)" in text and "Dina (your alarm, even while paused)" in text, text


async def test_meeting_points_are_proposed_on_the_map_answered_and_cancelled(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        username = await register_in_page(page, browser.origin, "meeter", name="Meg")
        dana, eve = await friends_with_page(hw, page, username, ("dana", "Dana"), ("eve", "Eve"))
        await dana.ok("share.always", **{"with": [username]})
        await dana.request("pos", id=NO_ID, **fix())
        eve_token = eve.token
        await eve.close()  # offline: her invitation waits for her next sign-in

        await open_map(page)
        await page.wait_for_function("() => document.querySelector('#friends-map').dataset.friends === '1'")
        await page.locator("#friends-map").click(position={"x": 120, "y": 160})
        form = page.get_by_role("form", name="Propose a meeting point")
        await form.get_by_label("Name of the place").fill(HOSTILE_PLACE)
        await form.get_by_role("checkbox", name=re.compile("Dana")).check()
        await form.get_by_role("checkbox", name=re.compile("Eve")).check()
        await form.get_by_role("button", name="Propose").click()
        meet = await dana.expect_event("meet", timeout=10)
        meeting = meet["meeting"]
        assert meeting["name"] == HOSTILE_PLACE and meeting["from"]["username"] == username
        assert abs(meeting["lat"] - HERE[0]) < 0.05 and abs(meeting["lon"] - HERE[1]) < 0.05, meeting  # near Dana's dot

        card = page.get_by_role("article", name=f"Meeting point {HOSTILE_PLACE}")
        await card.get_by_text(HOSTILE_PLACE, exact=True).wait_for()
        assert await page.locator("#friends-map").get_by_text(HOSTILE_PLACE, exact=True).count() == 1
        await card.get_by_text(re.compile(r"Eve: no answer yet \(queued \d")).wait_for()
        await card.get_by_text(re.compile(r"Dana: no answer yet \(delivered \d")).wait_for()
        await assert_no_markup(page)

        # Eve comes online: she gets it, and the page shows when.
        eve = await hw.hello(eve_token, label="eve-back")
        await eve.expect_event("meet", timeout=10)
        await card.get_by_text(re.compile(r"Eve: no answer yet \(delivered \d")).wait_for()
        await dana.ok("meet.accept", meetingId=meeting["meetingId"])
        await card.get_by_text("Dana: accepted").wait_for()

        # Dana proposes one to the page's user, who accepts and then declines.
        theirs = (await dana.ok("meet.propose", to=[username], lat=HERE[0] + 0.002, lon=HERE[1], name="The fountain",
                                time=int(time.time() * 1000) + 3600_000))["meeting"]
        proposal = page.get_by_role("article", name="Meeting point The fountain")
        await proposal.get_by_text("Proposed by Dana").wait_for()
        assert "reached you at once" in await proposal.text_content()
        await proposal.get_by_role("button", name="Accept").click()
        response = await dana.expect_event("meet.response", timeout=10, predicate=lambda e: e["by"] == username)
        assert response["response"] == "accepted" and response["meetingId"] == theirs["meetingId"]
        await proposal.get_by_text("You: accepted").wait_for()
        await page.wait_for_function("() => document.querySelector('#friends-map').dataset.meetings === '2'")
        await screenshots(page, "meeting-points")
        await proposal.get_by_role("button", name="Decline").click()
        response = await dana.expect_event("meet.response", timeout=10, predicate=lambda e: e["by"] == username)
        assert response["response"] == "declined"

        # The page's user cancels their own: the invitees hear it, the card and the pin go.
        await card.get_by_role("button", name="Cancel meeting point").click()
        cancelled = await dana.expect_event("meet.cancelled", timeout=10)
        assert cancelled["meetingId"] == meeting["meetingId"]
        await card.wait_for(state="detached")
        await page.wait_for_function("() => document.querySelector('#friends-map').dataset.meetings === '1'")
        # Dana cancels hers: it goes from the page too.
        await dana.ok("meet.cancel", meetingId=theirs["meetingId"])
        await proposal.wait_for(state="detached")


async def test_messages_show_their_states_count_unread_and_never_take_focus_from_an_alarm(hw, screenshots):
    async with browser_for(hw.relay) as browser:
        page = await browser.page()
        username = await register_in_page(page, browser.origin, "texter", name="Tess")
        fay, gus = await friends_with_page(hw, page, username, ("fay", "Fay"), ("gus", "Gus"))
        gus_token = gus.token
        await gus.close()

        # A message arrives on the home screen: announced, and counted on Fay's row.
        await fay.ok("msg.send", to=username, text=HOSTILE_TEXT)
        fay_row = page.get_by_role("listitem").filter(has_text="Fay (@")
        await fay_row.get_by_role("button", name="Messages (1 unread)").wait_for()
        await page.get_by_role("status").filter(has_text="New message from Fay").wait_for()
        await screenshots(page, "home-unread")
        await fay_row.get_by_role("button", name="Messages (1 unread)").click()
        thread = page.get_by_role("list", name="Messages with Fay")
        await thread.get_by_text(HOSTILE_TEXT, exact=True).wait_for()
        await assert_no_markup(page)
        read = await fay.expect_event("msg.read", timeout=10)
        assert read["by"] == username

        # Ours: delivered at once to Fay (online), then read.
        await page.get_by_label("Message", exact=True).fill("on my way 🚶\u200d♀️ \u200fשלום")
        await page.get_by_role("button", name="Send").click()
        got = await fay.expect_event("msg", timeout=10)
        assert got["message"]["text"] == "on my way 🚶\u200d♀️ \u200fשלום"
        mine = thread.get_by_role("listitem").filter(has_text="on my way")
        await mine.get_by_text(re.compile(r"^Delivered \d")).wait_for()
        await fay.ok("msg.read", messageId=got["message"]["messageId"])
        await mine.get_by_text(re.compile(r"^Read \d")).wait_for()
        await screenshots(page, "messages")

        # To Gus, offline: queued, and delivered when he is back.
        await page.get_by_role("button", name="‹ Back").click()
        await page.get_by_role("listitem").filter(has_text="Gus (@").get_by_role("button", name="Messages").click()
        await page.get_by_label("Message", exact=True).fill("call me when you land")
        await page.get_by_role("button", name="Send").click()
        queued = page.get_by_role("list", name="Messages with Gus").get_by_role("listitem").filter(has_text="call me")
        await queued.get_by_text(re.compile(r"queued until Gus is online")).wait_for()
        gus = await hw.hello(gus_token, label="gus-back")
        await gus.expect_event("msg", timeout=10)
        await queued.get_by_text(re.compile(r"^Delivered \d")).wait_for()

        # An alarm has the screen: a new message is counted and announced, but takes neither the
        # screen nor the focus.
        await page.get_by_role("button", name="‹ Back").click()
        alarm = (await fay.ok("alarm.raise", text="Help", lat=HERE[0], lon=HERE[1]))["alarm"]
        overlay = page.get_by_role("alertdialog", name="ALARM")
        await overlay.wait_for()
        await page.focus("#alarm-ack")
        await fay.ok("msg.send", to=username, text="are you there?")
        await fay_row.get_by_role("button", name="Messages (1 unread)").wait_for()
        await page.get_by_role("status").filter(has_text="New message from Fay").wait_for()
        assert await page.evaluate("document.activeElement.id") == "alarm-ack"
        assert await overlay.is_visible()
        await fay.ok("alarm.cancel", alarmId=alarm["alarmId"])
        await overlay.wait_for(state="detached")

        # The threads outlive a reload (the relay forgets a message once read); sign-out forgets them.
        await page.reload()
        await fay_row.get_by_role("button", name="Messages (1 unread)").click()
        await page.get_by_role("list", name="Messages with Fay").get_by_text(HOSTILE_TEXT, exact=True).wait_for()
        await page.get_by_role("button", name="‹ Back").click()
        await page.click("#sign-out")
        await page.wait_for_selector("#sign-in-form")
        assert await page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('homeward.messages'))") == []


async def test_the_app_is_installable_and_runs_no_service_worker_until_notifications_are_on(hw, tmp_path):
    # A persistent profile: Chromium offers no installing in an incognito-like context (Playwright's default).
    from playwright.async_api import async_playwright

    origin = f"https://{hw.relay.host}:{hw.relay.port}"
    requests: list[str] = []
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, viewport=PHONE, ignore_https_errors=True,
            args=["--no-sandbox", "--disable-dev-shm-usage",
                  "--ignore-certificate-errors-spki-list=" + ",".join(relay_key_hashes(hw.relay))])
        try:
            context.on("request", lambda request: requests.append(request.url))
            page = context.pages[0] if context.pages else await context.new_page()
            response = await page.request.get(origin + "/static/manifest.webmanifest")
            assert response.status == 200 and response.headers["content-type"].startswith("application/manifest+json")
            assert "manifest-src 'self'" in response.headers["content-security-policy"]
            manifest = await response.json()
            assert manifest["start_url"] == "/" and manifest["display"] == "standalone"
            for icon in manifest["icons"]:
                image = await page.request.get(origin + icon["src"])
                assert image.status == 200 and image.headers["content-type"] == icon["type"], icon
                if icon["type"] == "image/png":
                    body = await image.body()
                    width, height = int.from_bytes(body[16:20], "big"), int.from_bytes(body[20:24], "big")
                    assert f"{width}x{height}" == icon["sizes"], icon
            await register_in_page(page, origin, "installer")
            # Chromium's own verdict: the page can be installed (added to the home screen).
            cdp = await context.new_cdp_session(page)
            app_manifest = await cdp.send("Page.getAppManifest")
            assert not app_manifest["errors"], app_manifest["errors"]
            errors = (await cdp.send("Page.getInstallabilityErrors"))["installabilityErrors"]
            assert errors == [], errors
            # No service worker before anyone asked for notifications.
            assert await page.evaluate("navigator.serviceWorker.getRegistrations().then(r => r.length)") == 0
        finally:
            await context.close()
    assert {urlsplit(url).hostname for url in requests} <= {hw.relay.host}, requests


async def test_without_leaflet_the_friends_map_draws_its_own_and_a_tap_still_proposes(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("friends-plain"), *WEB_ARGS, "--leaflet-dir", "/nonexistent") as relay:
        hw = Harness(relay)
        try:
            async with browser_for(relay) as browser:
                page = await browser.page()
                username = await register_in_page(page, browser.origin, "plainmap")
                [ann] = await friends_with_page(hw, page, username, ("ann", HOSTILE_NAME))
                await ann.ok("share.always", **{"with": [username]})
                await ann.request("pos", id=NO_ID, **fix())
                await open_map(page)
                assert await page.get_attribute("#friends-map", "data-renderer") == "plain"
                await page.locator("#friends-map").get_by_text(HOSTILE_NAME, exact=True).wait_for()
                await assert_no_markup(page)
                # The dot is a friend: a tap opens their details. Elsewhere, a tap proposes a meeting point there.
                await page.locator("#friends-map circle.friend").click()
                await page.get_by_role("region", name=re.compile("Ann")).wait_for()
                box = await page.locator("#friends-map").bounding_box()
                await page.locator("#friends-map").click(position={"x": box["width"] / 2 + 60, "y": box["height"] / 2})
                form = page.get_by_role("form", name="Propose a meeting point")
                await form.get_by_label("Name of the place").fill("The bench")
                await form.get_by_role("checkbox", name=re.compile("Ann")).check()
                await form.get_by_role("button", name="Propose").click()
                meeting = (await ann.expect_event("meet", timeout=10))["meeting"]
                # East of Ann by the tapped distance (a few hundred metres at most), same latitude.
                assert meeting["lat"] == pytest.approx(HERE[0], abs=0.0005) and HERE[1] < meeting["lon"] < HERE[1] + 0.01, meeting
                await page.locator("#friends-map").get_by_text("The bench", exact=True).wait_for()
                assert not [u for u in browser.requests if "/vendor/" in u]
        finally:
            await hw.aclose()
