"""Fixtures for the cross-node checks and fault cases: one cluster (cluster.py) for the whole session.

The contract suite's client, harness and hooks are reused as they are (async tests in their own event
loop, clients closed after each test, relay logs in the report of a failed test). A test places each
client on purpose: `endpoint=` a node (`nodes[0]` is n1) or the balancer.

Every test that breaks something (kills a node, stops PostgreSQL or nats-server) brings it back in a
`finally`, and waits until haproxy sees all three relays up again, so the next test starts whole.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from cluster import Cluster, contract, push_double

pytest_pyfunc_call = contract.pytest_pyfunc_call
pytest_runtest_makereport = contract.pytest_runtest_makereport

# Short enough that the fault cases can wait them out; the defaults (60 s, 30 s, 5 s) are for people.
LOST_CONTACT_GRACE = 5.0
ALARM_REPEAT_INTERVAL = 4.0
STORE_TIMEOUT = 2.0


@pytest.fixture(scope="session")
def cluster():
    binary = os.environ.get("HOMEWARD_RELAY_BIN") or contract.find_binary()
    if not binary:
        pytest.fail("no relay binary: set HOMEWARD_RELAY_BIN or build .build/debug/homeward-relay", pytrace=False)
    # Push to the double on loopback (test_push_cluster.py); no --vapid-key: the relays agree on one by themselves.
    c = Cluster(binary, ["--lost-contact-grace", str(LOST_CONTACT_GRACE),
                         "--alarm-repeat-interval", str(ALARM_REPEAT_INTERVAL),
                         "--store-timeout", str(STORE_TIMEOUT),
                         "--push-allow-http", "--push-allow-private", "--vapid-subject", push_double.SUBJECT])
    with c:
        yield c


@pytest.fixture(scope="session")
def double():
    """A push service on 127.0.0.1 that records and answers every push (push_double.py)."""
    d = push_double.PushServiceDouble()
    yield d
    d.close()


@pytest.fixture(scope="session")
def nodes(cluster) -> list:
    return cluster.nodes


@pytest.fixture(scope="session")
def balancer(cluster):
    return contract.RunningRelay(cluster.balancer_url, cluster.ca_path)


@pytest.fixture
def hw(cluster, nodes, balancer):
    for node in nodes:
        node.mark_log()
    return contract.Harness(nodes[0], [*nodes, balancer])


# --------------------------------------------------------------------------------------------- helpers


async def eventually(what: str, check, timeout: float, interval: float = 0.1) -> float:
    """Awaits `check()` (async, true when done) until it holds; returns the seconds it took. For
    deadlines the cluster promises (presence within 2 s, ...): the relays have no event to await there."""
    started = time.monotonic()
    while True:
        if await check():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(interval)


async def befriend(hw, a, b, timeout: float = 5):
    """hw.befriend, asking again while a's relay answers not_found: a user registered on another relay a
    moment ago may not be in its cache yet. That this should not happen at all is
    test_a_user_registered_on_one_node_can_be_befriended_at_once_from_another, not every test's business."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await hw.befriend(a, b)
        except AssertionError as failure:
            if "not_found" not in str(failure) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.1)


async def befriend_all(hw, owner, *others):
    await asyncio.gather(*(befriend(hw, owner, other) for other in others))


async def walk(hw, walker, *observers, **start) -> str:
    """The walker starts a session inviting the observers, who all accept; returns its id."""
    sid = (await walker.ok("session.start", invite=[o.username for o in observers], **start))["session"]["sessionId"]
    for observer in observers:
        await observer.expect_event("session.invite", predicate=lambda e: e["session"]["sessionId"] == sid)
        await observer.ok("session.accept", sessionId=sid)
    return sid


async def flowing(walker, *observers, timeout: float = 10):
    """The walker sends a position every 100 ms until every observer has had one (then drops them).
    A fault case's starting point: that the first positions after `session.accept` arrive is
    test_cross_node's business, not the fault's."""
    started = time.monotonic()
    lat = -1.0
    while True:
        lat = round(lat - 0.001, 3)
        await walker.ok("pos", lat=lat, lon=0.0)
        if all(positions_from(o, walker) for o in observers):
            break
        if time.monotonic() - started > timeout:
            missing = [o.node for o in observers if not positions_from(o, walker)]
            raise AssertionError(f"no position reached the observers on {missing} within {timeout} s")
        await asyncio.sleep(0.1)  # a walker's pace
    for observer in observers:  # the last one sent arrives last: then none is still in flight to be dropped
        await wait_for_position(observer, walker, lat, timeout=timeout)
        observer.drain("pos")


def positions_from(client, walker) -> list[float]:
    """The `lat` of every position from `walker` the client has buffered, in arrival order."""
    return [e["lat"] for e in client.events_of("pos", lambda e: e.get("from") == walker.username)]


async def wait_for_position(client, walker, lat: float, timeout: float = 5):
    await client.expect_event("pos", timeout=timeout, predicate=lambda e: e.get("from") == walker.username and e["lat"] == lat)


async def node_killed(cluster, node):
    """kill -9 of a relay, then haproxy has it out of rotation."""
    await asyncio.to_thread(node.kill)
    others = {n.node_id for n in cluster.nodes if n is not node}
    await asyncio.to_thread(cluster.wait_balancer_sees, others, 20)


async def node_back(cluster, node):
    """Starts a killed relay again (same port and data directory) and waits until haproxy uses it."""
    if node.proc is None or node.proc.poll() is not None:
        await asyncio.to_thread(node.start)
    await asyncio.to_thread(cluster.wait_balancer_sees, {n.node_id for n in cluster.nodes}, 30)
