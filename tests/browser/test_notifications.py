"""Alarm notifications in a real browser: the service worker at /sw.js, what it shows for a push,
where a click on a notification leads, and the page's "Alarm notifications" control.

Headless Chromium has no push service (and nothing here may leave the machine), so the tests drive
the worker's own handlers (`self.homeward`) with the payload the relay would push (the WebSocket
event's JSON), and the control is shown both where subscribing is impossible and, with the browser's
PushManager.subscribe replaced by a stand-in that returns a subscription, all the way to the relay.
"""

from __future__ import annotations

import base64
import json
import time

from conftest import WEB_ARGS, Harness, befriend_page, browser_for, register_in_page, started_relay

# RFC 8291 Appendix A's user agent keys: a valid P-256 point and a 16-byte secret.
P256DH = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
AUTH = "BTBZMqHH6r4Tts7J_aSIgg"


async def service_worker(page):
    """The page's active service worker (Playwright's handle), once it controls the page's scope. The
    app registers it only when notifications are turned on: this taps "Turn on" (headless Chromium has
    no push service, so the subscription fails, but the worker is there)."""
    assert await page.evaluate("navigator.serviceWorker.getRegistrations().then(r => r.length)") == 0
    await page.click("#alarm-notifications-button")
    await page.locator("#alarm-notifications:not([data-state=working])").wait_for()
    scope = await page.evaluate("navigator.serviceWorker.ready.then(r => r.scope)")
    workers = page.context.service_workers
    worker = workers[0] if workers else await page.context.wait_for_event("serviceworker")
    return worker, scope


async def push(worker, payload):
    """Delivers `payload` to the worker's push handler as a push event's data would."""
    await worker.evaluate("p => self.homeward.handlePush({data: {json: () => p}})", payload)


async def notifications(worker) -> list[dict]:
    return await worker.evaluate("""async () => (await self.registration.getNotifications()).map(n => ({
        title: n.title, body: n.body, tag: n.tag, requireInteraction: n.requireInteraction, data: n.data}))""")


async def friend_of_page(hw: Harness, page, username: str, prefix: str):
    """A new phone, named after `prefix`, befriended with the page's user."""
    phone = await hw.register(prefix, name=prefix.capitalize())
    await befriend_page(hw, page, phone, username)
    return phone


async def raise_alarm(phone, text: str) -> dict:
    """`phone` raises an alarm to its friends; returns the `alarm` event they get (and the relay pushes)."""
    reply = await phone.ok("alarm.raise", text=text, lat=57.7089, lon=11.9746, acc=9)
    return {"type": "alarm", "alarm": reply["alarm"]}


async def test_the_service_worker_shows_an_alarm_once_per_alarm_and_other_events_briefly(hw):
    async with browser_for(hw.relay, trust_relay=True) as browser:
        page = await browser.page(notifications=True)
        username = await register_in_page(page, browser.origin, "notified")
        response = await page.request.get(browser.origin + "/sw.js")
        assert response.status == 200 and response.headers["content-type"].startswith("text/javascript"), response.headers
        assert "worker-src 'self'" in response.headers["content-security-policy"], response.headers
        worker, scope = await service_worker(page)
        assert scope == browser.origin + "/", scope
        assert worker.url == browser.origin + "/sw.js", worker.url

        event = await raise_alarm(await friend_of_page(hw, page, username, "ann"), "Someone is following me")
        alarm_id = event["alarm"]["alarmId"]
        await push(worker, event)
        [shown] = await notifications(worker)
        assert shown["title"] == "ALARM: Ann needs help", shown
        assert shown["tag"] == alarm_id and shown["requireInteraction"] is True, shown
        assert "Someone is following me" in shown["body"] and "57.70890, 11.97460" in shown["body"], shown
        assert shown["data"]["url"] == f"/#alarm={alarm_id}", shown

        # A repeat replaces the alarm's notification instead of adding one.
        await push(worker, {**event, "repeat": 1})
        [shown] = await notifications(worker)
        assert shown["tag"] == alarm_id and "reminder 1" in shown["body"], shown

        # The other pushed events: a short note each, beside the alarm.
        await push(worker, {"type": "friend.request", "from": {"username": "cleo", "name": "Cleo"}})
        await push(worker, {"type": "session.invite", "session": {"sessionId": "s_1", "owner": {"username": "dan"}, "note": "From the bar"}})
        await push(worker, {"type": "session.lost", "sessionId": "s_1", "since": int(time.time() * 1000)})
        await worker.evaluate("() => self.homeward.handlePush({data: {json: () => { throw new SyntaxError('not JSON'); }}})")
        titles = {n["title"]: n for n in await notifications(worker)}
        assert set(titles) == {"ALARM: Ann needs help", "Cleo wants to be your friend", "@dan asks you to follow their walk",
                               "Contact lost", "Homeward"}, titles
        assert titles["@dan asks you to follow their walk"]["body"] == "From the bar"
        assert titles["Cleo wants to be your friend"]["requireInteraction"] is False


async def test_a_cancelled_alarm_replaces_its_notification(hw):
    async with browser_for(hw.relay, trust_relay=True) as browser:
        page = await browser.page(notifications=True)
        username = await register_in_page(page, browser.origin, "cancelnote")
        worker, _ = await service_worker(page)
        event = await raise_alarm(await friend_of_page(hw, page, username, "bea"), "Help")
        alarm_id = event["alarm"]["alarmId"]
        await push(worker, event)
        await push(worker, {"type": "friend.request", "from": {"username": "cleo", "name": "Cleo"}})
        await push(worker, {"type": "alarm.cancelled", "alarmId": alarm_id, "reason": "safe at home"})
        shown = {n["tag"]: n for n in await notifications(worker)}
        assert len(shown) == 2, shown  # the alarm's notification was replaced, the other one stays
        over = shown[alarm_id]
        assert over["title"] == "Alarm over" and "safe at home" in over["body"], over
        assert over["requireInteraction"] is False, over


async def test_a_click_on_an_alarm_notification_opens_that_alarm(hw):
    async with browser_for(hw.relay, trust_relay=True) as browser:
        page = await browser.page(notifications=True)
        username = await register_in_page(page, browser.origin, "clicker")
        worker, _ = await service_worker(page)
        ann = await friend_of_page(hw, page, username, "ann")
        bob = await friend_of_page(hw, page, username, "bob")
        older = await raise_alarm(ann, "First alarm")
        newer = await raise_alarm(bob, "Second alarm")
        older_id, newer_id = older["alarm"]["alarmId"], newer["alarm"]["alarmId"]
        # The takeover keeps showing the alarm it showed first.
        await page.locator(f"#alarm-overlay[data-alarm='{older_id}']").wait_for()

        # The app is open: a click on the newer alarm's notification closes it and switches the page to that alarm.
        await push(worker, newer)
        await worker.evaluate("""async id => {
            const [notification] = await self.registration.getNotifications({tag: id});
            await self.homeward.handleNotificationClick({notification});
        }""", newer_id)
        await page.locator(f"#alarm-overlay[data-alarm='{newer_id}']").wait_for()
        assert "Second alarm" in await page.text_content("#alarm-text")
        assert await notifications(worker) == []

        # No window open: the worker opens /#alarm=ID, which shows that alarm after the sign-in, not the
        # newest one the takeover would pick (opened here as a new tab of the same browser, which has the token).
        second = await page.context.new_page()
        await second.goto(browser.origin + f"/#alarm={older_id}")
        await second.locator(f"#alarm-overlay[data-alarm='{older_id}']").wait_for()
        await second.wait_for_function("() => location.hash === ''")  # the id is not kept in the address


async def test_the_control_says_plainly_when_this_browser_cannot_subscribe(hw):
    async with browser_for(hw.relay, trust_relay=True) as browser:
        page = await browser.page(notifications=True)
        await register_in_page(page, browser.origin, "nopush")
        control = page.locator("#alarm-notifications")
        await control.locator("text=Alarm notifications").wait_for()
        assert await control.get_attribute("data-state") == "off"
        await page.click("#alarm-notifications-button")
        # Headless Chromium has no push service: the control says so and the app carries on.
        await control.and_(page.locator("[data-state=unsupported], [data-state=failed]")).wait_for()
        text = await page.text_content("#alarm-notifications-text")
        assert "push service" in text, text
        await page.fill("#add-friend input[name=username]", "nobody_here_at_all")
        await page.click("#add-friend button")
        await page.locator("#toast", has_text="Nobody is called").wait_for()


async def test_without_the_permission_the_control_says_blocked(hw):
    async with browser_for(hw.relay, trust_relay=True) as browser:
        page = await browser.page()  # no notifications permission: headless Chromium denies it
        await register_in_page(page, browser.origin, "blocked")
        await page.locator("#alarm-notifications[data-state=blocked]").wait_for()
        assert "Blocked" in await page.text_content("#alarm-notifications-text")
        assert await page.locator("#alarm-notifications-button").count() == 0  # nothing the page can do


FAKE_PUSH_SERVICE = """
// A stand-in for the browser's push service: subscribe() returns a subscription shaped as a real one
// (its endpoint on loopback, which the relay under test accepts), remembering the key it was given.
(() => {
  let current = null;
  const make = (options) => ({
    endpoint: 'https://127.0.0.1:9/push/' + Math.random().toString(36).slice(2),
    options,
    toJSON() { return { endpoint: this.endpoint, expirationTime: null, keys: { p256dh: '%s', auth: '%s' } }; },
    async unsubscribe() { current = null; window.fakePushUnsubscribed = true; return true; },
  });
  PushManager.prototype.subscribe = async function (options) {
    window.fakePushKey = btoa(String.fromCharCode(...new Uint8Array(options.applicationServerKey)));
    current = make(options);
    return current;
  };
  PushManager.prototype.getSubscription = async function () { return current; };
})();
""" % (P256DH, AUTH)


async def test_turning_on_hands_the_subscription_to_the_relay_and_off_removes_it(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("push-web"), *WEB_ARGS, "--push-allow-private") as relay:
        hw = Harness(relay)
        try:
            async with browser_for(relay, trust_relay=True) as browser:
                page = await browser.page(notifications=True)
                await page.context.add_init_script(FAKE_PUSH_SERVICE)
                username = await register_in_page(page, browser.origin, "subscriber")
                _, _, body = relay.http_get("/v1/push/key")
                await page.click("#alarm-notifications-button")
                await page.locator("#alarm-notifications[data-state=on]").wait_for()
                assert "On:" in await page.text_content("#alarm-notifications-text")
                same_user = await hw.login(username)
                [subscription] = (await same_user.ok("push.list"))["subscriptions"]
                assert subscription["kind"] == "webpush" and subscription["endpoint"].startswith("https://127.0.0.1:9/push/"), subscription
                # The page subscribed with the relay's key (standard base64 of the same bytes).
                page_key = await page.evaluate("window.fakePushKey")
                assert b64url_bytes(json.loads(body)["vapidPublicKey"]) == b64url_bytes(page_key), (body, page_key)

                await page.click("#alarm-notifications-button")  # "Turn off"
                await page.locator("#alarm-notifications[data-state=off]").wait_for()
                assert (await same_user.ok("push.list"))["subscriptions"] == []
                assert await page.evaluate("window.fakePushUnsubscribed") is True
                # Off means no service worker of the app either.
                assert await page.evaluate("navigator.serviceWorker.getRegistrations().then(r => r.length)") == 0
        finally:
            await hw.aclose()


def b64url_bytes(text: str) -> bytes:
    """The bytes of base64 or base64url text, with or without padding."""
    text = text.replace("+", "-").replace("/", "_").rstrip("=")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
