"""Faults of issue 13, each against the running cluster: kill -9 of a relay mid-walk, PostgreSQL
restarted, nats-server restarted; and a timer whose node is killed. Each test puts back what it broke."""

from __future__ import annotations

import asyncio
import time

from cluster import contract
from conftest import (LOST_CONTACT_GRACE, STORE_TIMEOUT, befriend_all, flowing, node_back, node_killed,
                      positions_from, wait_for_position, walk)


def _others(nodes, node):
    return [n for n in nodes if n is not node]


async def test_kill_9_of_the_walkers_relay_mid_walk_loses_nothing_acknowledged(hw, cluster, nodes, balancer):
    walker = await hw.register("killw", endpoint=balancer)
    killed = cluster.node(walker.node)
    survivors = _others(nodes, killed)
    observers = [await hw.register(f"killo{i}", endpoint=n) for i, n in enumerate(survivors)]
    beside = await hw.register("killbeside", endpoint=killed)  # an observer on the relay that dies
    recipient, stranger = await hw.users("killr", "kills")
    await befriend_all(hw, walker, *observers, beside, recipient)
    await walk(hw, walker, *observers, beside)
    await flowing(walker, *observers, beside)
    await asyncio.gather(recipient.close(), stranger.close())
    for lat in (1.0, 1.1, 1.2):
        await walker.ok("pos", lat=lat, lon=0.0)
    # Acknowledged just before the crash: a friend request, alarm contacts, an alarm to someone offline.
    await walker.ok("friend.request", username=stranger.username)
    await walker.ok("alarm.contacts", usernames=[recipient.username])
    alarm = (await walker.ok("alarm.raise", text="before the crash", to=[recipient.username]))["alarm"]
    killed_at = time.monotonic()
    try:
        # No waiting for haproxy to notice: a connection it sends to the dead relay is refused and
        # redispatched to another one, so clients can come back at once.
        await asyncio.to_thread(killed.kill)
        await walker.wait_closed()
        await beside.wait_closed()
        # Back through the balancer, well within the grace; the dead relay is out of rotation.
        walker = await hw.hello(walker.token, endpoint=balancer)
        beside = await hw.hello(beside.token, endpoint=balancer)
        assert killed.node_id not in (walker.node, beside.node)
        for lat in (2.0, 2.1):
            await walker.ok("pos", lat=lat, lon=0.0)
        for observer in [*observers, beside]:
            await wait_for_position(observer, walker, 2.1)
        for observer in observers:
            got = positions_from(observer, walker)
            assert got == sorted(got), f"{observer.node}: positions out of order: {got}"
        # About time passing: the lost-contact grace (a timer on whichever relay owns the timers) is waited
        # out, plus a second, before each observer's relay is asked for a barrier.
        remaining = LOST_CONTACT_GRACE + 1 - (time.monotonic() - killed_at)
        for observer in observers:
            await observer.no_event("session.lost", within=max(0.0, remaining))
            remaining = 0.0
        # Nothing acknowledged was lost.
        assert stranger.username in [u["username"] for u in (await walker.ok("friend.list"))["outgoing"]]
        assert (await walker.ok("alarm.contacts"))["usernames"] == [recipient.username]
        back = await hw.login(recipient.username, endpoint=balancer)
        pending = await back.expect_event("alarm", predicate=lambda e: e["alarm"]["alarmId"] == alarm["alarmId"])
        assert pending["alarm"]["text"] == "before the crash"
        await walker.ok("alarm.cancel", alarmId=alarm["alarmId"])
    finally:
        await node_back(cluster, killed)


async def test_observers_get_session_lost_once_when_the_walker_stays_away_past_the_grace(hw, cluster, nodes):
    killed = nodes[2]
    walker = await hw.register("lostw", endpoint=killed)
    observers = [await hw.register(f"losto{i}", endpoint=n) for i, n in enumerate(_others(nodes, killed))]
    await befriend_all(hw, walker, *observers)
    sid = await walk(hw, walker, *observers)
    await flowing(walker, *observers)
    await walker.ok("pos", lat=5.0, lon=6.0)
    for observer in observers:
        await wait_for_position(observer, walker, 5.0)
    await asyncio.sleep(2.0)  # the promise: a walker's last position is right on every relay within 2 s
    killed_at = time.monotonic()
    try:
        await node_killed(cluster, killed)
        for observer in observers:
            lost = await observer.expect_event("session.lost", timeout=LOST_CONTACT_GRACE + 15)
            after = time.monotonic() - killed_at
            assert lost["sessionId"] == sid and lost["lastPosition"]["lat"] == 5.0, lost
            assert after >= LOST_CONTACT_GRACE - 0.5, f"{observer.node}: session.lost {after:.1f} s after the kill"
        await asyncio.sleep(1.0)  # room for a second announcement from another node
        for observer in observers:
            assert observer.events_of("session.lost") == [], f"{observer.node}: session.lost twice"
        walker = await hw.hello(walker.token, endpoint=nodes[0])
        for observer in observers:
            await observer.expect_event("session.resumed", predicate=lambda e: e["sessionId"] == sid)
    finally:
        await node_back(cluster, killed)


async def test_a_check_in_deadline_fires_once_when_the_node_that_set_it_is_killed(hw, cluster, nodes):
    killed = nodes[1]
    walker = await hw.register("cikill", endpoint=killed)
    observers = [await hw.register(f"cikillo{i}", endpoint=n) for i, n in enumerate(_others(nodes, killed))]
    await befriend_all(hw, walker, *observers)
    await walk(hw, walker, *observers, checkInBy=int(time.time() * 1000) + 5000)
    try:
        await node_killed(cluster, killed)
        first = [await o.expect_event("alarm", timeout=20, predicate=lambda e: e["alarm"].get("auto") is True
                                      and e.get("repeat") is None) for o in observers]
        await asyncio.sleep(1.0)  # room for a duplicate
        for observer in observers:
            again = observer.events_of("alarm", lambda e: e["alarm"].get("auto") is True and e.get("repeat") is None)
            assert again == [], f"{observer.node}: the missed check-in alarm came twice"
        await observers[0].ok("alarm.ack", alarmId=first[0]["alarm"]["alarmId"])
    finally:
        await node_back(cluster, killed)


async def test_postgresql_restarted_positions_flow_storage_fails_fast_and_recovers(hw, cluster, nodes):
    walker = await hw.register("pgw", endpoint=nodes[0])
    observers = [await hw.register(f"pgo{i}", endpoint=n) for i, n in enumerate(nodes[1:])]
    contact = await hw.register("pgc", endpoint=nodes[2])
    await befriend_all(hw, walker, *observers, contact)
    await walk(hw, walker, *observers)
    await flowing(walker, *observers)
    pids = [n.proc.pid for n in nodes]
    # One client per relay, each with a friend to name as its alarm contact (a write that needs storage).
    writes = [(walker, contact.username), *[(o, walker.username) for o in observers]]
    try:
        await asyncio.to_thread(cluster.postgres.stop)
        # Positions keep flowing while the database is down.
        for lat in (7.0, 7.1, 7.2):
            await walker.ok("pos", lat=lat, lon=0.0)
        for observer in observers:
            await wait_for_position(observer, walker, 7.2)
        # Requests that need storage get a clear error on every node, in bounded time (--store-timeout,
        # deploy/README.md). Too slow is noted and checked at the end, so that recovery is tested too.
        slow = []
        for client, friend in writes:
            started = time.monotonic()
            reply = await client.request("alarm.contacts", usernames=[friend], timeout=STORE_TIMEOUT + 10)
            took = time.monotonic() - started
            assert reply.get("type") == "error" and reply.get("code") == "internal", f"{client.node}: {reply}"
            if took > STORE_TIMEOUT + 1:
                slow.append(f"{client.node}: {took:.1f} s")
        await asyncio.to_thread(cluster.postgres.start)
        # Recovery without restarting the relays.
        for client, friend in writes:
            deadline = time.monotonic() + 30
            while True:
                reply = await client.request("alarm.contacts", usernames=[friend])
                if reply.get("type") == "ok" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)  # the relay's own reconnect backoff decides; poll it
            assert reply.get("type") == "ok", f"{client.node}: still failing 30 s after PostgreSQL came back: {reply}"
        assert [n.proc.pid for n in nodes] == pids, "a relay was restarted"
        await walker.ok("pos", lat=7.3, lon=0.0)
        for observer in observers:
            await wait_for_position(observer, walker, 7.3)
        friends = {f["username"] for f in (await walker.ok("friend.list"))["friends"]}
        assert friends == {o.username for o in observers} | {contact.username}
        assert not slow, f"storage errors took longer than --store-timeout {STORE_TIMEOUT} s + 1 s: {slow}"
    finally:
        if cluster.postgres.proc is None:
            await asyncio.to_thread(cluster.postgres.start)


async def test_nats_server_restarted_positions_resume_within_2s_and_nothing_durable_is_lost(hw, cluster, nodes):
    walker = await hw.register("natsw", endpoint=nodes[0])
    observers = [await hw.register(f"natso{i}", endpoint=n) for i, n in enumerate(nodes[1:])]
    stranger = await hw.register("natss", endpoint=nodes[2])
    await stranger.close()
    await befriend_all(hw, walker, *observers)
    await walk(hw, walker, *observers)
    await flowing(walker, *observers)
    try:
        await asyncio.to_thread(cluster.nats.kill)
        # Durable requests during the outage are committed to PostgreSQL.
        await walker.ok("friend.request", username=stranger.username)
        alarm = (await walker.ok("alarm.raise", text="during the outage", to=[observers[1].username]))["alarm"]
        await asyncio.to_thread(cluster.nats.start)
        restarted = time.monotonic()
        lat = 8.0
        pending = list(observers)
        while pending and time.monotonic() - restarted < 5:
            lat = round(lat + 0.001, 3)
            await walker.ok("pos", lat=lat, lon=0.0)
            await asyncio.sleep(0.1)  # a walker's pace, about ten positions a second
            pending = [o for o in pending if not positions_from(o, walker)]
        took = time.monotonic() - restarted
        assert not pending, f"no position on {[o.node for o in pending]} 5 s after nats-server came back"
        assert took <= 2.0 + 0.2, f"positions resumed {took:.1f} s after nats-server came back"
        back = await hw.login(stranger.username, endpoint=nodes[1])
        await back.expect_event("friend.request", predicate=lambda e: contract.by_name(e.get("from")) == walker.username)
        again = await hw.hello(observers[1].token, endpoint=nodes[0])
        await again.expect_event("alarm", predicate=lambda e: e["alarm"]["alarmId"] == alarm["alarmId"])
        await walker.ok("alarm.cancel", alarmId=alarm["alarmId"])
    finally:
        if cluster.nats.proc is None:
            await asyncio.to_thread(cluster.nats.start)


async def test_an_alarm_raised_while_postgresql_is_stopped_is_answered_delivered_and_stored_later(hw, cluster, nodes):
    """A panic button answers within --store-timeout + 1 s whatever fails: with PostgreSQL stopped the alarm
    still reaches the recipients connected to every relay (marked "stored": false), also right behind a
    write that is failing on the same relay; once PostgreSQL is back it is stored once (per relay spool),
    and a recipient who was offline gets it at sign-in."""
    owner = await hw.register("spoolw", endpoint=nodes[0])
    busy = await hw.register("spoolb", endpoint=nodes[0])
    recipients = [await hw.register(f"spoolr{i}", endpoint=n) for i, n in enumerate(nodes[1:])]
    offline = await hw.register("spoolo", endpoint=nodes[2])
    await befriend_all(hw, owner, busy, *recipients, offline)
    offline_token = offline.token
    await offline.close()
    try:
        await asyncio.to_thread(cluster.postgres.stop)
        # A write that fails on the owner's relay first (it waits for the store timeout, then its read-back
        # starts), and the alarm right behind it.
        failing = asyncio.create_task(busy.request("alarm.contacts", usernames=[owner.username], timeout=STORE_TIMEOUT + 10))
        await asyncio.sleep(0.2)  # a head start for that write: nothing answers it before the store timeout
        started = time.monotonic()
        reply = await owner.request("alarm.raise", text="pg is down", lat=57.7, lon=11.9, timeout=30)
        took = time.monotonic() - started
        assert reply.get("type") == "ok", f"the alarm was refused while PostgreSQL is down (after {took:.1f} s): {reply}"
        assert reply.get("stored") is False, reply
        assert took <= STORE_TIMEOUT + 1, f"the alarm took {took:.1f} s to answer (store timeout {STORE_TIMEOUT} s + 1 s)"
        alarm_id = reply["alarm"]["alarmId"]
        for r in recipients:
            event = await r.expect_event("alarm", timeout=2, predicate=lambda e: e["alarm"]["alarmId"] == alarm_id)
            assert event.get("stored") is False, event
        await failing
        # A second alarm, now that the relay knows the store is down: no store call of its own (at most it
        # waits for a read-back already under way).
        started = time.monotonic()
        again = await owner.request("alarm.raise", text="still down", timeout=30)
        assert again.get("type") == "ok" and again.get("stored") is False, again
        assert time.monotonic() - started <= STORE_TIMEOUT + 1, f"took {time.monotonic() - started:.1f} s"
        second_id = again["alarm"]["alarmId"]
        await owner.ok("alarm.cancel", alarmId=second_id)

        await asyncio.to_thread(cluster.postgres.start)
        # Stored once the store is back: every relay learns of it, so a recipient's ack on another relay works.
        deadline = time.monotonic() + 30
        while True:
            ack = await recipients[0].request("alarm.ack", alarmId=alarm_id)
            if ack.get("type") == "ok" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert ack.get("type") == "ok", f"the spooled alarm was not stored 30 s after PostgreSQL came back: {ack}"
        assert cluster.postgres.psql(f"SELECT count(*) FROM alarms WHERE id = '{alarm_id}' AND ended_at IS NULL",
                                     database="homeward") == "1"
        assert cluster.postgres.psql(f"SELECT ended_at IS NOT NULL FROM alarms WHERE id = '{second_id}'",
                                     database="homeward") == "t", "the cancel of the second alarm was stored too"
        back = await hw.hello(offline_token, endpoint=nodes[2])
        event = await back.expect_event("alarm", timeout=5, predicate=lambda e: e["alarm"]["alarmId"] == alarm_id)
        assert event["alarm"]["text"] == "pg is down"
        # The barrier orders only nodes[2]'s own sending; the owner's relay stored its spool and tells the
        # others through the bus, which no request to nodes[2] waits for: time for that.
        await back.no_event("alarm", within=0.5, predicate=lambda e: e["alarm"]["alarmId"] == second_id)
    finally:
        if cluster.postgres.proc is None:
            await asyncio.to_thread(cluster.postgres.start)


async def test_a_relay_killed_between_a_commit_and_its_notice_still_gets_its_event_to_the_recipient(hw, cluster, nodes):
    """A relay that dies after committing a friend request and before the change notice that tells the other
    relays (held back here by the fault-test hook --test-notice-delay-ms) loses nothing: the recipient,
    connected to another relay, gets the request within 2 s of the kill. The others find the dead relay
    silent (a missed heartbeat), read the store and send what is pending and was not shown."""
    victim = nodes[0]
    hooked = ["--test-notice-delay-ms", "30000"]
    sender = await hw.register("diesender", endpoint=victim)
    recipient = await hw.register("dierecipient", endpoint=nodes[1])
    token = sender.token
    await sender.close()
    # Started again with the hook (every notice of a commit waits for it: so the users exist before).
    await node_killed(cluster, victim)
    victim.extra_args = victim.extra_args + hooked
    try:
        await node_back(cluster, victim)
        sender = await hw.hello(token, endpoint=victim)
        pending = asyncio.create_task(sender.request("friend.request", username=recipient.username, timeout=60))
        # Committed: the request is in PostgreSQL; its notice (and so the reply) waits for the hook.
        deadline = time.monotonic() + 10
        stored = "0"
        while stored != "1" and time.monotonic() < deadline:
            stored = await asyncio.to_thread(
                cluster.postgres.psql,
                f"SELECT count(*) FROM friend_requests WHERE from_user = '{sender.username}' AND to_user = '{recipient.username}'",
                "homeward")
        assert stored == "1", "the friend request was never committed"
        assert not pending.done(), "the reply came before the notice: the hook did not hold it"
        killed_at = time.monotonic()
        await asyncio.to_thread(victim.kill)
        event = await recipient.expect_event("friend.request", timeout=5,
                                             predicate=lambda e: e.get("from", {}).get("username") == sender.username)
        took = time.monotonic() - killed_at
        assert event["from"]["username"] == sender.username
        assert took <= 2.0, f"the recipient heard of the request {took:.1f} s after the kill"
        await recipient.no_event("friend.request")
        if not pending.done():
            pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)  # the sender's relay died: no reply
    finally:
        victim.extra_args = [a for a in victim.extra_args if a not in hooked]
        await node_back(cluster, victim)
