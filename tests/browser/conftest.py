"""Fixtures for the browser tests: a relay serving the web app, and a real Chromium driven by Playwright.

The relay process, the WebSocket clients that play the other phones (`Harness`, `Client`) and the
runner for `async def` tests come from the contract suite's conftest (tests/python/conftest.py),
loaded here under its own module name so that both suites share one copy of that code.

The browser is Debian's Chromium (/usr/lib/chromium/chromium, or HOMEWARD_CHROMIUM); Playwright
never downloads one. The relay's development certificate is not in the browser's trust store, so
each context is opened with `ignore_https_errors=True`; everything else (TLS, WebSocket, CSP) is the
real thing. A service worker's script is fetched past that setting, so the service worker tests open
their browser with `browser_for(relay, trust_relay=True)`: Chromium then accepts exactly the relay's
certificate keys (`--ignore-certificate-errors-spki-list`, the SHA-256 of the dev CA's and server
certificate's public keys). The other tests keep the untrusted certificate, with which Chromium
caches nothing (a cached answer would lose its Strict-Transport-Security header, which they check).

Every page records each request it makes; `Browser.assert_stayed_local()` fails a test whose page
asked anything of a host other than the relay (no tile server is configured here, so a request to
anyone else would leak whom the user follows).

`--screenshots` saves phone-size screenshots of the main views to docs/screenshots/.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
SCREENSHOTS = REPO_ROOT / "docs" / "screenshots"
CHROMIUM = os.environ.get("HOMEWARD_CHROMIUM", "/usr/lib/chromium/chromium")
PHONE = {"width": 390, "height": 844}


def _load_contract_conftest():
    spec = importlib.util.spec_from_file_location("homeward_contract_conftest", REPO_ROOT / "tests" / "python" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


contract = _load_contract_conftest()
Harness = contract.Harness
Client = contract.Client
PASSWORD = contract.PASSWORD
unique_username = contract.unique_username
started_relay = contract.started_relay
pytest_pyfunc_call = contract.pytest_pyfunc_call  # runs `async def` tests, closes their clients
pytest_runtest_makereport = contract.pytest_runtest_makereport  # relay log in failure reports
relay_binary = contract.relay_binary


def pytest_addoption(parser):
    parser.addoption("--screenshots", action="store_true", help="save phone-size screenshots to docs/screenshots/")


@pytest.fixture(scope="session")
def screenshots(request):
    """A function saving a screenshot of a page under docs/screenshots/NAME.png, when --screenshots is given."""
    enabled = request.config.getoption("--screenshots")

    async def take(page, name: str):
        if enabled:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            await page.evaluate("document.getElementById('toast')?.classList.add('hidden'); window.scrollTo(0, 0)")
            await page.wait_for_timeout(300)  # let the map finish its last redraw before the picture
            await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))

    return take


WEB_ARGS = ("--web-root", str(REPO_ROOT / "web"))


@pytest.fixture(scope="session")
def web_relay(relay_binary, tmp_path_factory):
    """One relay for the session, serving the repository's web app with Debian's Leaflet, no tiles."""
    with started_relay(relay_binary, tmp_path_factory.mktemp("web-relay"), *WEB_ARGS,
                       "--leaflet-dir", "/usr/share/javascript/leaflet") as r:
        yield r


@pytest.fixture
def hw(web_relay):
    web_relay.mark_log()
    return Harness(web_relay)


class Browser:
    """One Chromium with its contexts (one per simulated person); records every request."""

    def __init__(self, playwright, relay, trust_relay: bool = False):
        self.playwright = playwright
        self.relay = relay
        self.trust_relay = trust_relay
        self.browser = None
        self.requests: list[str] = []
        self.problems: list[str] = []  # page errors and CSP violations

    @property
    def origin(self) -> str:
        return f"https://{self.relay.host}:{self.relay.port}"

    async def start(self):
        if not Path(CHROMIUM).exists():
            pytest.fail(f"{CHROMIUM} not found: apt-get install chromium (never `playwright install`)", pytrace=False)
        args = ["--no-sandbox", "--disable-dev-shm-usage"]
        if self.trust_relay and (spki := relay_key_hashes(self.relay)):
            args.append("--ignore-certificate-errors-spki-list=" + ",".join(spki))
        self.browser = await self.playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        return self

    async def page(self, *, geolocation: dict | None = None, notifications: bool = False):
        """A new person: their own context (storage), at phone size; `notifications` grants that permission."""
        permissions = (["geolocation"] if geolocation else []) + (["notifications"] if notifications else [])
        context = await self.browser.new_context(
            ignore_https_errors=True, viewport=PHONE, device_scale_factor=1, locale="en-GB", timezone_id="Europe/Stockholm",
            geolocation=geolocation, permissions=permissions)
        context.on("request", lambda request: self.requests.append(request.url))
        page = await context.new_page()
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("console", lambda msg: self.problems.append(f"console: {msg.text}")
                if msg.type == "error" and "Content Security Policy" in msg.text else None)
        if os.environ.get("HOMEWARD_BROWSER_DEBUG"):
            page.on("console", lambda msg: print("console", msg.type, msg.text))
            page.on("websocket", lambda ws: (ws.on("framesent", lambda f: print("page ->", f)),
                                             ws.on("framereceived", lambda f: print("page <-", f))))
        page.set_default_timeout(15000)
        return page

    def assert_stayed_local(self, also: set[str] = frozenset()):
        """No request went anywhere but the relay (and the hosts in `also`, a configured tile server)."""
        hosts = {urlsplit(url).hostname for url in self.requests if not url.startswith(("data:", "blob:", "about:"))}
        assert hosts <= {self.relay.host} | set(also), f"requests left {self.relay.host}: {sorted(hosts)}; {self.requests}"

    async def close(self):
        if self.browser:
            await self.browser.close()


def relay_key_hashes(relay) -> list[str]:
    """base64(SHA-256(SubjectPublicKeyInfo)) of the relay's development certificates (openssl does the DER)."""
    hashes = []
    for pem in ("server.pem", "dev-ca.pem"):
        path = relay.data_dir / "certs" / pem
        if not path.exists():
            continue
        key = subprocess.run(["openssl", "x509", "-in", str(path), "-pubkey", "-noout"], capture_output=True, check=True).stdout
        der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=key, capture_output=True, check=True).stdout
        hashes.append(base64.b64encode(hashlib.sha256(der).digest()).decode())
    return hashes


@contextlib.asynccontextmanager
async def browser_for(relay, tile_host: str | None = None, trust_relay: bool = False):
    """A Chromium for one test; at the end, no page error, no CSP violation, no request off loopback
    (but to `tile_host`, whose requests the test answers itself: nothing leaves the machine).
    `trust_relay`: the relay's certificate is trusted, as service workers need."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await Browser(playwright, relay, trust_relay).start()
        try:
            yield browser
            browser.assert_stayed_local({tile_host} if tile_host else set())
            assert not browser.problems, browser.problems
        finally:
            await browser.close()


async def register_in_page(page, origin: str, prefix: str, name: str | None = None) -> str:
    """Opens the app and creates an account through its form; returns the username."""
    username = unique_username(prefix)
    await page.goto(origin + "/")
    await page.click("text=New here? Create an account")
    await page.fill("input[name=username]", username)
    if name:
        await page.fill("input[name=name]", name)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("#sign-in-form button[type=submit]")
    await page.wait_for_selector("#share-walk")
    return username


async def befriend_page(hw: Harness, page, phone: Client, username: str):
    """`phone` asks the browser's user, who accepts in the page."""
    await phone.ok("friend.request", username=username)
    await page.click(f"#requests [data-username='{phone.username}'] button.accept")
    await phone.expect_event("friend.added", timeout=10)
    await page.wait_for_selector(f"#friends li[data-username='{phone.username}']")
