"""Fixtures and helpers for the independent end-to-end suite.

The suite drives a real `homeward-relay` process from outside, over TLS WebSockets, and checks
it against the wire contract (shared protocol.md). Async tests are plain `async def` functions:
the `pytest_pyfunc_call` hook below runs each one in a fresh event loop (no pytest-asyncio
needed), with a per-test time limit, and closes every client the test opened.

Fixtures:
- `relay`:     one relay for the whole session (fresh data dir), shared by most tests.
               In cluster mode (below) the first node of a cluster that is already running.
- `own_relay`: a relay of the test's own, for tests that restart it (SIGKILL + start again).
- `hw`:        the harness for `relay`; `own_hw` the same for `own_relay`. It opens clients,
               registers users with unique names, makes friends, and checks relay health.

Cluster mode (tests/cluster/run.sh): HOMEWARD_TEST_RELAY_URLS lists the wss URLs of a running
cluster's nodes and its balancer, comma-separated; HOMEWARD_TEST_CA is the CA file they all share;
HOMEWARD_TEST_RELAY_LOGS optionally the nodes' log files in the same order (empty for the balancer).
`hw` then opens each new client on the next URL in turn, so a test's walker, observers and alarm
recipients are on different nodes. Tests that start, restart or inspect a relay process of their own
(they use `relay_binary`, or are marked `single_relay`) are skipped there with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import inspect
import json
import os
import re
import secrets
import signal
import socket
import ssl
import struct
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_HOSTNAME = os.environ.get("HOMEWARD_TEST_SERVER_HOSTNAME", "localhost")
PASSWORD = "correct horse battery"
TEST_TIMEOUT = float(os.environ.get("HOMEWARD_TEST_TIMEOUT", "120"))
START_TIMEOUT = float(os.environ.get("HOMEWARD_START_TIMEOUT", "60"))
REPLY_TIMEOUT = 15.0  # registration runs a slow KDF; keep generous

NO_ID = object()  # pass as id=NO_ID to send a request without an id

CLUSTER_URLS = [url.strip() for url in os.environ.get("HOMEWARD_TEST_RELAY_URLS", "").split(",") if url.strip()]
# Cluster mode: an event may come from another relay (a change notice or a position on the bus), and
# no request to the receiving relay waits for those; `Client.no_event` waits this long as well there.
CROSS_RELAY_GRACE = 0.5


# --------------------------------------------------------------------------------------------
# pytest plumbing


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds (still run by default)")
    config.addinivalue_line("markers", "single_relay(reason): needs the one relay process itself; skipped in cluster mode")


def pytest_collection_modifyitems(config, items):
    """Cluster mode: skips the tests that need a relay process of their own, saying why."""
    if not CLUSTER_URLS:
        return
    for item in items:
        marker = item.get_closest_marker("single_relay")
        if marker is not None:
            reason = marker.args[0] if marker.args else "needs the relay process itself"
        elif "relay_binary" in item.fixturenames:
            reason = "starts a relay of its own (its own flags, or restarts it)"
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=f"cluster mode: {reason}"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs `async def` tests in their own event loop, then closes the clients they opened."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    funcargs = pyfuncitem.funcargs
    testargs = {name: funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    harnesses = [v for v in funcargs.values() if isinstance(v, Harness)]

    async def main():
        try:
            await asyncio.wait_for(pyfuncitem.obj(**testargs), timeout=TEST_TIMEOUT)
        finally:
            for h in harnesses:
                await h.aclose()

    asyncio.run(main())
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    seen = set()
    for value in getattr(item, "funcargs", {}).values():
        relays = value.endpoints if isinstance(value, Harness) else [value]
        for relay in relays:
            if isinstance(relay, Relay) and relay.log_path is not None and id(relay) not in seen:
                seen.add(id(relay))
                report.sections.append((f"relay log ({relay.log_path})", relay.log_since_mark() or "(nothing logged)"))


# --------------------------------------------------------------------------------------------
# The relay process


def find_binary() -> str:
    env = os.environ.get("HOMEWARD_RELAY_BIN")
    if env:
        return env
    for rel in (".build/release/homeward-relay", ".build/debug/homeward-relay"):
        path = REPO_ROOT / rel
        if path.exists():
            return str(path)
    return ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    """One relay process on a loopback port and data dir; can be SIGKILLed and started again."""

    def __init__(self, binary: str, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "relay.log"
        self.port = free_port()
        self.metrics_port = free_port()  # the plain-HTTP metrics listener (--metrics-listen)
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen | None = None
        self._log_file = None
        self._mark = 0
        self.ssl_ctx: ssl.SSLContext | None = None
        self.sentinel: dict | None = None  # two befriended users, for health checks
        self.extra_args: list[str] = []  # more relay flags (limits), for tests that need them

    # -- lifecycle

    @property
    def ca_path(self) -> Path:
        return self.data_dir / "certs" / "dev-ca.pem"

    @property
    def ws_url(self) -> str:
        return f"wss://{self.host}:{self.port}/v1/ws"

    def start(self) -> None:
        if not self.binary or not Path(self.binary).exists():
            pytest.fail(
                f"relay binary not found ({self.binary or 'no HOMEWARD_RELAY_BIN, no .build/*/homeward-relay'})",
                pytrace=False,
            )
        env = dict(os.environ)
        env.setdefault("HOMEWARD_PBKDF2_ITERATIONS", "210000")
        # Every test connects from 127.0.0.1; test_accounts.py sets the limit where it tests it.
        env.setdefault("HOMEWARD_REGISTRATIONS_PER_ADDRESS", "0")
        self._log_file = open(self.log_path, "ab", buffering=0)
        self._log_file.write(f"\n===== starting relay on port {self.port} at {time.ctime()}\n".encode())
        self.proc = subprocess.Popen(
            [self.binary, "--host", self.host, "--port", str(self.port), "--data-dir", str(self.data_dir),
             "--metrics-listen", f"127.0.0.1:{self.metrics_port}", *self.extra_args],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(self.workdir),
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"relay exited with {self.proc.returncode} during start\n{self.log_tail()}", pytrace=False
                )
            if self.ca_path.exists():
                try:
                    self.ssl_ctx = make_ssl_context(self.ca_path)
                    status, _, _ = self.http_get("/healthz", timeout=2)
                    if status == 200:
                        return
                    last_error = RuntimeError(f"/healthz answered {status}")
                except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
                    last_error = exc
            time.sleep(0.1)  # polling interval, not synchronisation
        self.stop()
        pytest.fail(f"relay not ready within {START_TIMEOUT}s ({last_error})\n{self.log_tail()}", pytrace=False)

    def stop(self) -> None:
        """SIGTERM, then wait up to 10 s, then SIGKILL."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._close_log()

    def kill(self) -> None:
        """kill -9, and wait for the process to be gone."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._close_log()

    def restart(self, hard: bool = True) -> None:
        """Stops the relay (SIGKILL by default) and starts it again on the same port and data dir."""
        if hard:
            self.kill()
        else:
            self.stop()
        self.start()

    async def restart_async(self, hard: bool = True) -> None:
        await asyncio.to_thread(self.restart, hard)

    def _close_log(self) -> None:
        if self._log_file:
            self._log_file.close()
            self._log_file = None

    # -- logs

    def mark_log(self) -> None:
        self._mark = self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_since_mark(self, limit: int = 20000) -> str:
        if not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()[self._mark:]
        text = data.decode("utf-8", "replace")
        return text[-limit:]

    def log_tail(self, limit: int = 8000) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_bytes()[-limit:].decode("utf-8", "replace")

    # -- plain HTTP(S)

    def http_get(self, path: str, headers: dict | None = None, timeout: float = 10):
        """GET over TLS (verified against the dev CA); returns (status, lowercased headers, body)."""
        conn = _HTTPSConnection(self.host, self.port, context=self.ssl_ctx, timeout=timeout)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
        finally:
            conn.close()


    def metrics_get(self, path: str = "/metrics", headers: dict | None = None, timeout: float = 10):
        """GET on the metrics listener (plain HTTP on loopback); returns (status, lowercased headers, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
        finally:
            conn.close()


class RunningRelay(Relay):
    """A relay someone else started and stops (cluster mode: a node or the balancer), reached at its URL."""

    def __init__(self, url: str, ca_path: Path, log_path: str = ""):
        parts = urllib.parse.urlsplit(url)
        self.binary = ""
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 443
        self.proc = None
        self.log_path = Path(log_path) if log_path else None
        self._mark = 0
        self.ssl_ctx = make_ssl_context(ca_path)
        self.sentinel = None
        self.extra_args = []

    @property
    def ws_url(self) -> str:
        return self.url

    def metrics_get(self, path: str = "/metrics", headers: dict | None = None, timeout: float = 10):
        pytest.skip("the metrics listener of a relay started elsewhere is not known to the tests")

    def start(self) -> None:
        pytest.fail(f"{self.url} is not started by the tests", pytrace=False)

    stop = kill = start

    def mark_log(self) -> None:
        if self.log_path is not None:
            super().mark_log()


def running_cluster() -> list[RunningRelay]:
    """The cluster in HOMEWARD_TEST_RELAY_URLS (see the module docstring); [] when not in cluster mode."""
    if not CLUSTER_URLS:
        return []
    ca = os.environ.get("HOMEWARD_TEST_CA", "")
    if not ca or not Path(ca).exists():
        pytest.fail(f"HOMEWARD_TEST_RELAY_URLS is set but HOMEWARD_TEST_CA ({ca!r}) is not a CA file", pytrace=False)
    logs = os.environ.get("HOMEWARD_TEST_RELAY_LOGS", "").split(",")
    return [RunningRelay(url, Path(ca), logs[i] if i < len(logs) else "") for i, url in enumerate(CLUSTER_URLS)]


class _HTTPSConnection(http.client.HTTPSConnection):
    """Connects to the loopback address but verifies the certificate for SERVER_HOSTNAME."""

    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=SERVER_HOSTNAME)


def make_ssl_context(ca_path: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_path))
    return ctx


@pytest.fixture(scope="session")
def relay_binary() -> str:
    return find_binary()


@pytest.fixture(scope="session")
def cluster_endpoints() -> list:
    """Cluster mode: every node and the balancer; [] with one relay of our own."""
    return running_cluster()


@pytest.fixture(scope="session")
def relay(request, cluster_endpoints, tmp_path_factory):
    if cluster_endpoints:
        yield cluster_endpoints[0]
        return
    # Asked for here rather than as an argument: in cluster mode, tests that need the binary are skipped.
    r = Relay(request.getfixturevalue("relay_binary"), tmp_path_factory.mktemp("relay"))
    r.start()
    yield r
    r.stop()


@contextlib.contextmanager
def started_relay(relay_binary: str, workdir: Path, *extra_args: str):
    """A relay of its own with extra flags (limits), stopped when the block ends."""
    r = Relay(relay_binary, workdir)
    r.extra_args = list(extra_args)
    r.start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def own_relay(relay_binary, tmp_path_factory):
    with started_relay(relay_binary, tmp_path_factory.mktemp("own-relay")) as r:
        yield r


# --------------------------------------------------------------------------------------------
# WebSocket client


def unique_username(prefix: str = "u") -> str:
    p = re.sub(r"[^a-z0-9_.-]", "", prefix.lower())[:20]
    return f"{p}{secrets.token_hex(5)}"  # <= 30 characters, lowercase


def by_name(value: Any) -> Any:
    """`by`/`from` fields may be a username or a user object; compare by username."""
    if isinstance(value, dict):
        return value.get("username")
    return value


def usernames(users) -> list:
    return sorted(by_name(u) for u in users)


class Client:
    """One WebSocket connection. Replies are matched by `re`; everything else is buffered as events."""

    def __init__(self, relay: Relay, label: str = "client"):
        self.relay = relay
        self.label = label
        self.ws = None
        self.events: list[dict] = []  # messages without `re` (events, and errors to id-less requests)
        self.received: list[Any] = []  # every message, in order
        self.stray_replies: list[dict] = []  # replies nobody waited for
        self.binary_received: list[bytes] = []
        self._pending: dict[str, asyncio.Future] = {}
        self._next_id = 1
        self._cond: asyncio.Condition | None = None
        self._reader: asyncio.Task | None = None
        self.closed = False
        self.close_code: int | None = None
        self.close_reason: str | None = None
        # set after authentication
        self.username: str | None = None
        self.name: str | None = None
        self.password: str | None = None
        self.token: str | None = None
        self.user: dict | None = None
        self.node: str | None = None  # `node` of the sign-in reply (a relay in a cluster)
        self.harness: Harness | None = None  # the harness that opened it (`barrier` borrows its clients)

    def __repr__(self):
        return f"<Client {self.label} {self.username or ''}>"

    # -- connection

    async def connect(self, subprotocols=("homeward.v1",), ping_interval: float | None = 20,
                      server_hostname: str = SERVER_HOSTNAME, **kwargs) -> "Client":
        self._cond = asyncio.Condition()
        self.ws = await ws_connect(
            self.relay.ws_url,
            ssl=self.relay.ssl_ctx,
            server_hostname=server_hostname,
            subprotocols=list(subprotocols) if subprotocols else None,
            compression=None,
            proxy=None,
            ping_interval=ping_interval,
            open_timeout=10,
            close_timeout=5,
            max_size=2**22,
            **kwargs,
        )
        self._reader = asyncio.create_task(self._read_loop())
        return self

    @property
    def subprotocol(self):
        return self.ws.subprotocol

    async def _read_loop(self):
        try:
            async for raw in self.ws:
                if isinstance(raw, bytes):
                    self.binary_received.append(raw)
                    continue
                try:
                    msg = json.loads(raw)
                except ValueError:
                    msg = {"type": "<not json>", "raw": raw}
                self.received.append(msg)
                if isinstance(msg, dict) and "re" in msg:
                    fut = self._pending.pop(json.dumps(msg["re"]), None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    else:
                        self.stray_replies.append(msg)
                else:
                    self.events.append(msg)
                async with self._cond:
                    self._cond.notify_all()
        except ConnectionClosed:
            pass
        except Exception as exc:  # noqa: BLE001 - keep the reason for the test report
            self.events.append({"type": "<reader error>", "error": repr(exc)})
        finally:
            self.closed = True
            rcvd = self.ws.protocol.close_rcvd
            self.close_code = rcvd.code if rcvd is not None else 1006
            self.close_reason = rcvd.reason if rcvd is not None else None
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"{self.label}: connection closed ({self.close_code})"))
            self._pending.clear()
            async with self._cond:
                self._cond.notify_all()

    async def close(self):
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 10)

    async def wait_closed(self, timeout: float = 10) -> int:
        """Waits for the relay to close the connection; returns the close code it sent (1006: none)."""
        try:
            await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.label}: still open after {timeout}s; events: {self.events[-10:]}") from None
        return self.close_code

    # -- sending

    async def send_json(self, obj: Any):
        await self.ws.send(json.dumps(obj))

    async def send_raw(self, data: str | bytes):
        await self.ws.send(data)

    def _new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i

    async def request(self, msg_type: str, /, *, timeout: float = REPLY_TIMEOUT, **fields) -> dict | None:
        """Sends a request and returns its reply (ok or error). `id=NO_ID` sends it without an id
        and returns None; `id=<value>` uses that id instead of the next integer."""
        msg = {"type": msg_type}
        rid = fields.pop("id", None)
        if rid is NO_ID:
            msg.update(fields)
            await self.send_json(msg)
            return None
        if rid is None:
            rid = self._new_id()
        msg["id"] = rid
        msg.update(fields)
        return await self.send_and_wait(json.dumps(msg), rid, timeout=timeout)

    async def send_and_wait(self, text: str, rid: Any, timeout: float = REPLY_TIMEOUT) -> dict:
        """Sends raw text and waits for the reply whose `re` equals `rid`."""
        key = json.dumps(rid)
        fut = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        await self.ws.send(text)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self._pending.pop(key, None)
            raise AssertionError(f"{self.label}: no reply to {text[:200]!r} within {timeout}s; events: {self.events[-10:]}")

    async def send_expect_error(self, text: str, rid: Any, timeout: float = REPLY_TIMEOUT) -> dict:
        """Sends raw text; returns the reply with `re == rid`, or else the first id-less error event
        (for input a relay may be unable to read an id from)."""
        key = json.dumps(rid)
        fut = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        await self.ws.send(text)
        found: list = []

        def check():
            if fut.done():
                return True
            i = self._find("error", None)
            if i is not None:
                found.append(self.events.pop(i))
                return True
            return self.closed

        try:
            async with self._cond:
                await asyncio.wait_for(self._cond.wait_for(check), timeout)
        except asyncio.TimeoutError:
            pass
        self._pending.pop(key, None)
        if fut.done() and not fut.exception():
            return fut.result()
        if found:
            return found[0]
        raise AssertionError(f"{self.label}: no reply or error for {text[:200]!r}; events: {self.events[-10:]}")

    async def ok(self, msg_type: str, /, **fields) -> dict:
        reply = await self.request(msg_type, **fields)
        assert reply.get("type") == "ok", f"{self.label}: {msg_type} {fields} -> {reply}"
        return reply

    async def err(self, msg_type: str, code: str, /, **fields) -> dict:
        reply = await self.request(msg_type, **fields)
        assert reply.get("type") == "error" and reply.get("code") == code, \
            f"{self.label}: {msg_type} {fields}: expected error {code}, got {reply}"
        assert isinstance(reply.get("message", ""), str)
        return reply

    async def sync(self):
        """A round trip on this connection's event loop: everything the relay sent this connection before
        now has been read, and every position this connection sent before has been fanned out (`ping` is
        answered on the loop after the read burst that carried them). Not a barrier for what the relay's
        actor sends: see `barrier`."""
        await self.ok("ping")

    async def barrier(self):
        """Returns once every event that the relay was already bound to send this connection has arrived:
        those of every request answered before now (on any connection of this relay), and positions whose
        sender's `ok` or `sync` came back before now.

        Why that holds on one relay: `session.list` goes through the relay actor's FIFO mailbox like every
        request, so it is served after every command submitted before it; the actor hands a connection its
        events (`ClientSink.send`) and its replies (`done`) as tasks on the connection's event loop, which
        runs them in order, so the reply comes after them. A position is fanned out on the sender's loop,
        and the tasks for other loops are queued before the sender's reply is flushed (`ConnectionLoop`).

        A connection that cannot ask the actor (a share-link viewer: every request `forbidden`; one not
        signed in) asks through a signed-in connection of the same relay (that puts every event for this
        one on its loop), then makes two round trips on its own loop: the first frame may be read in the
        same turn of the loop as those tasks run, the second only in a later one.

        Not covered: what a timer sends, what the relay has not been told yet (a close it is still
        noticing on another connection, a page that has not sent its request), and in cluster mode what
        comes from another relay. `no_event` waits for those explicitly."""
        if self.closed:
            return  # nothing more arrives
        try:
            reply = await self.request("session.list")
            if reply.get("type") == "ok" or reply.get("code") == "internal":
                return  # answered by the actor (`internal`: storage is down, and it said so in turn)
            if CLUSTER_URLS:
                return  # the helper might be on another node; no_event's cross-relay grace covers it
            helper = await self._signed_in_neighbour()
            if helper is not None:
                await helper.ok("session.list")
            for _ in range(2):
                await self.request("ping")
        except ConnectionError:
            return  # closed meanwhile: everything it was sent has been read

    async def _signed_in_neighbour(self) -> "Client | None":
        """Another open, signed-in client of the same harness on the same relay; registers one if none is."""
        harness = self.harness
        if harness is None:
            return None
        for c in harness.clients:
            if c is not self and c.relay is self.relay and not c.closed and c.username is not None:
                reply = await c.request("session.list")
                if reply.get("type") == "ok":
                    return c
        return await harness.register("barrier", endpoint=self.relay)

    # -- events

    def _find(self, msg_type: str | None, predicate: Callable | None):
        for i, ev in enumerate(self.events):
            if not isinstance(ev, dict):
                continue
            if msg_type is not None and ev.get("type") != msg_type:
                continue
            if predicate is not None and not predicate(ev):
                continue
            return i
        return None

    def events_of(self, msg_type: str, predicate: Callable | None = None) -> list:
        return [e for e in self.events if isinstance(e, dict) and e.get("type") == msg_type
                and (predicate is None or predicate(e))]

    async def expect_event(self, msg_type: str, timeout: float = 5, predicate: Callable | None = None) -> dict:
        """Waits for (and consumes) the first buffered or arriving event of this type."""
        found: list = []

        def check():
            i = self._find(msg_type, predicate)
            if i is not None:
                found.append(self.events.pop(i))
                return True
            return self.closed

        try:
            async with self._cond:
                await asyncio.wait_for(self._cond.wait_for(check), timeout)
        except asyncio.TimeoutError:
            pass
        if found:
            return found[0]
        state = f"closed ({self.close_code})" if self.closed else "open"
        raise AssertionError(
            f"{self.label}: no {msg_type!r} event within {timeout}s (connection {state}); buffered: {self.events[-15:]}"
        )

    async def no_event(self, msg_type: str, within: float = 0.0, predicate: Callable | None = None):
        """Asserts that no such event has arrived once the relay has answered a `barrier`: on one relay,
        none that a request answered before, or a position acknowledged before, would have caused.

        `within` waits that many seconds first, for what no barrier orders (see `barrier`): a timer,
        a close the relay may still be noticing, a browser's request. Each caller that passes it says
        why. In cluster mode every call waits at least `CROSS_RELAY_GRACE`, for events from other relays."""
        wait = max(within, CROSS_RELAY_GRACE) if CLUSTER_URLS else within
        if wait > 0:
            await asyncio.sleep(wait)
        await self.barrier()
        matches = self.events_of(msg_type, predicate)
        assert not matches, f"{self.label}: unexpected {msg_type!r} event(s): {matches}"

    def drain(self, msg_type: str | None = None):
        if msg_type is None:
            self.events.clear()
        else:
            self.events[:] = [e for e in self.events if not (isinstance(e, dict) and e.get("type") == msg_type)]

    # -- authentication

    def _take_auth(self, reply: dict, password: str | None = None):
        self.user = reply.get("user")
        self.node = reply.get("node")
        self.username = self.user.get("username") if isinstance(self.user, dict) else None
        self.name = self.user.get("name") if isinstance(self.user, dict) else None
        if "token" in reply:
            self.token = reply["token"]
        if password is not None:
            self.password = password
        self.label = f"{self.label}:{self.username}"


class Harness:
    """Opens clients against one relay (or, in cluster mode, against each endpoint in turn), and closes
    them all at the end of the test."""

    def __init__(self, relay: Relay, endpoints: list | None = None):
        self.relay = relay
        self.endpoints: list[Relay] = list(endpoints) if endpoints else [relay]
        self._next_endpoint = 0
        self.clients: list[Client] = []
        self._kdf_gate = asyncio.Semaphore(4)  # concurrent register/login (each runs a slow KDF)

    async def aclose(self):
        await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)
        self.clients.clear()

    def next_endpoint(self) -> Relay:
        endpoint = self.endpoints[self._next_endpoint % len(self.endpoints)]
        self._next_endpoint += 1
        return endpoint

    async def connect(self, label: str = "anon", endpoint: Relay | None = None, **kwargs) -> Client:
        """A new client on `endpoint`, or on the next endpoint in turn."""
        c = Client(endpoint or self.next_endpoint(), label)
        c.harness = self
        await c.connect(**kwargs)
        self.clients.append(c)
        return c

    async def register(self, prefix: str = "u", *, name: str | None = None, password: str = PASSWORD,
                       username: str | None = None, endpoint: Relay | None = None) -> Client:
        c = await self.connect(prefix, endpoint)
        fields = {"username": username or unique_username(prefix), "password": password}
        if name is not None:
            fields["name"] = name
        async with self._kdf_gate:
            reply = await c.request("register", **fields)
        assert reply.get("type") == "ok", f"register {fields['username']} -> {reply}"
        assert isinstance(reply.get("token"), str) and reply["token"], reply
        c._take_auth(reply, password)
        return c

    async def users(self, *prefixes: str) -> list[Client]:
        return list(await asyncio.gather(*(self.register(p) for p in prefixes)))

    async def login(self, username: str, password: str = PASSWORD, label: str = "login",
                    endpoint: Relay | None = None) -> Client:
        c = await self.connect(label, endpoint)
        async with self._kdf_gate:
            reply = await c.request("login", username=username, password=password)
        assert reply.get("type") == "ok", f"login {username} -> {reply}"
        c._take_auth(reply, password)
        return c

    async def hello(self, token: str, label: str = "hello", endpoint: Relay | None = None) -> Client:
        c = await self.connect(label, endpoint)
        reply = await c.request("hello", token=token)
        assert reply.get("type") == "ok", f"hello -> {reply}"
        c._take_auth(reply)
        c.token = token
        return c

    async def another_device(self, c: Client, label: str = "device") -> Client:
        d = await self.hello(c.token, label=label)
        d.password = c.password
        return d

    async def befriend(self, a: Client, b: Client):
        """a asks, b accepts; both see friend.added."""
        await a.ok("friend.request", username=b.username)
        await b.expect_event("friend.request", predicate=lambda e: by_name(e.get("from")) == a.username)
        await b.ok("friend.accept", username=a.username)
        await a.expect_event("friend.added", predicate=lambda e: by_name(e.get("user")) == b.username)
        await b.expect_event("friend.added", predicate=lambda e: by_name(e.get("user")) == a.username)

    async def go_offline(self, c: Client, watcher: Client | None = None):
        """Closes c; if a friend `watcher` is given, waits for its presence-offline event so the
        relay has certainly processed the disconnect."""
        await c.close()
        if watcher is not None:
            await watcher.expect_event(
                "presence", timeout=10,
                predicate=lambda e: e.get("username") == c.username and e.get("online") is False)

    async def check_healthy(self):
        """A fresh client can still log in and the sentinel friendship is intact."""
        s = self.relay.sentinel
        if s is None:
            a, b = await self.users("senta", "sentb")
            await self.befriend(a, b)
            s = self.relay.sentinel = {"a": a.username, "b": b.username}
            await a.close()
            await b.close()
        c = await self.login(s["a"], label="health")
        reply = await c.ok("friend.list")
        assert s["b"] in [f.get("username") for f in reply.get("friends", [])], reply
        await c.close()


@pytest.fixture
def hw(relay, cluster_endpoints):
    for r in cluster_endpoints or [relay]:
        r.mark_log()
    return Harness(relay, cluster_endpoints)


@pytest.fixture
def own_hw(own_relay):
    own_relay.mark_log()
    return Harness(own_relay)


# --------------------------------------------------------------------------------------------
# Raw WebSocket over TLS, for frames the websockets library will not send


class RawWebSocket:
    """A minimal blocking WebSocket client on an ssl socket: a manual handshake, masked frames
    built by hand, and a frame reader. Used for invalid UTF-8 in a text frame."""

    def __init__(self, relay: Relay, path: str = "/v1/ws", timeout: float = 15):
        raw = socket.create_connection((relay.host, relay.port), timeout=timeout)
        self.sock = relay.ssl_ctx.wrap_socket(raw, server_hostname=SERVER_HOSTNAME)
        self.sock.settimeout(timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        req = (
            f"GET {path} HTTP/1.1\r\nHost: {relay.host}:{relay.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(req.encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"closed during handshake: {self.buf!r}")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status_line = head.split(b"\r\n", 1)[0].decode()
        if " 101 " not in self.status_line + " ":
            raise ConnectionError(f"handshake refused: {head!r}")

    def send_frame(self, opcode: int, payload: bytes, fin: bool = True):
        mask = os.urandom(4)
        header = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text: str):
        self.send_frame(0x1, text.encode())

    def _read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_frame(self) -> tuple[int, bytes]:
        b0, b1 = self._read_exact(2)
        opcode = b0 & 0x0F
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8))[0]
        if b1 & 0x80:
            mask = self._read_exact(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self._read_exact(n)))
        else:
            data = self._read_exact(n)
        return opcode, data

    def read_json_reply(self, rid) -> dict:
        """Reads text frames until the reply with `re == rid`."""
        while True:
            opcode, data = self.read_frame()
            if opcode == 0x1:
                msg = json.loads(data)
                if isinstance(msg, dict) and msg.get("re") == rid:
                    return msg
            elif opcode == 0x8:
                raise ConnectionError(f"closed: {data!r}")

    def read_until_close(self) -> tuple[int | None, list]:
        """Returns (close code, text messages seen before it); None if the socket just ended."""
        texts = []
        while True:
            try:
                opcode, data = self.read_frame()
            except (ConnectionError, OSError, ssl.SSLError):
                return None, texts
            if opcode == 0x1:
                texts.append(data.decode("utf-8", "replace"))
            elif opcode == 0x9:  # ping -> pong
                self.send_frame(0xA, data)
            elif opcode == 0x8:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
                with contextlib.suppress(Exception):
                    self.send_frame(0x8, data[:2])
                return code, texts

    def close(self):
        with contextlib.suppress(Exception):
            self.sock.close()
