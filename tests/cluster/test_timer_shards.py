"""Timers spread over the relays: each relay fires the timers of the users in its shards (PostgresTimerLease),
each timer once, and a killed relay's shards are taken by the others, whose timers still fire once.

Which relay holds which shards is read from the relays themselves: the `homeward_timer_shards_held` gauge
of each (together they hold all 32, once the leases have settled) and the shards named in each relay's last
"timer shards moved" log line. A user's shard is the relay's stable hash of the username (`TimerShards`)."""

from __future__ import annotations

import re
import time

from cluster import contract
from conftest import ALARM_REPEAT_INTERVAL, befriend_all, eventually, node_back, node_killed, walk

SHARDS = 32


def shard_of(username: str) -> int:
    """FNV-1a (64 bits) of the UTF-8 bytes, modulo the shard count: TimerShards.shard(of:)."""
    value = 0xCBF29CE484222325
    for byte in username.encode():
        value = ((value ^ byte) * 0x100000001B3) % 2**64
    return value % SHARDS


def parse_shards(text: str) -> set[int]:
    if text == "all":
        return set(range(SHARDS))
    if text == "none":
        return set()
    shards: set[int] = set()
    for run in text.split(","):
        first, _, last = run.partition("-")
        shards.update(range(int(first), int(last or first) + 1))
    return shards


def held_count(node) -> int | None:
    status, _, body = node.metrics_get()
    if status != 200:
        return None
    match = re.search(rb"^homeward_timer_shards_held(?:\{[^}]*\})? (\S+)$", body, re.MULTILINE)
    return int(float(match.group(1))) if match else None


def logged_shards(node) -> set[int]:
    """The shards the relay's last "timer shards moved" line says it holds."""
    lines = [line for line in node.log_path.read_text("utf-8", "replace").splitlines() if "timer shards moved" in line]
    match = re.search(r"\bheld=(\S+)", lines[-1]) if lines else None
    return parse_shards(match.group(1)) if match else set()


async def settled_shards(nodes) -> dict:
    """Waits until the running relays together hold every shard, each relay at most its fair share; returns
    each relay's shards (by node id)."""
    share = -(-SHARDS // len(nodes))
    found: dict = {}

    async def check():
        counts = [held_count(n) for n in nodes]
        if None in counts or sum(counts) != SHARDS or max(counts) > share:
            return False
        found.clear()
        for node, count in zip(nodes, counts):
            found[node.node_id] = logged_shards(node)
            if len(found[node.node_id]) != count:
                return False
        return set().union(*found.values()) == set(range(SHARDS))

    await eventually("the relays to split the timer shards", check, timeout=20)
    return found


def username_in(shards: set[int], prefix: str) -> str:
    while True:
        name = contract.unique_username(prefix)
        if shard_of(name) in shards:
            return name


def missed_check_in(event) -> bool:
    return event["alarm"].get("auto") is True and event.get("repeat") is None


async def expect_once_then_repeat(observer, alarm_filter, what: str) -> dict:
    """The first alarm (one), then its first repeat: a second relay firing the same timer would have sent
    its copy of the first before the repeat (the repeat is `--alarm-repeat-interval` later)."""
    first = await observer.expect_event("alarm", timeout=20, predicate=lambda e: alarm_filter(e) and e.get("repeat") is None)
    alarm_id = first["alarm"]["alarmId"]
    await observer.expect_event("alarm", timeout=ALARM_REPEAT_INTERVAL + 10,
                                predicate=lambda e: e["alarm"]["alarmId"] == alarm_id and e.get("repeat") == 1)
    again = observer.events_of("alarm", lambda e: e["alarm"]["alarmId"] == alarm_id and e.get("repeat") is None)
    assert again == [], f"{observer.username} on {observer.node}: {what} came twice"
    return first


async def test_check_in_deadlines_of_users_in_every_relays_shards_fire_once(hw, cluster, nodes):
    held = await settled_shards(nodes)
    assert all(held[n.node_id] for n in nodes), f"every relay fires some timers: {held}"
    # One walker per relay's shards, each connected to the next relay (not the one firing its timers), observed
    # from the one after: every relay fires one of the deadlines.
    walkers, observers = [], []
    for i, firing in enumerate(nodes):
        walker = await hw.register(username=username_in(held[firing.node_id], "tsw"), endpoint=nodes[(i + 1) % 3])
        observer = await hw.register("tso", endpoint=nodes[(i + 2) % 3])
        await befriend_all(hw, walker, observer)
        walkers.append(walker)
        observers.append(observer)
    deadline = int(time.time() * 1000) + 3000
    for walker, observer in zip(walkers, observers):
        await walk(hw, walker, observer, checkInBy=deadline)
    for walker, observer in zip(walkers, observers):
        first = await expect_once_then_repeat(
            observer, lambda e, w=walker: missed_check_in(e) and e["alarm"]["from"]["username"] == w.username,
            "the missed check-in alarm")
        assert first["alarm"]["createdAt"] >= deadline, "not before the deadline"
        await observer.ok("alarm.ack", alarmId=first["alarm"]["alarmId"])


async def test_timers_of_a_killed_relays_shards_fire_once_on_the_others(hw, cluster, nodes):
    held = await settled_shards(nodes)
    killed, *survivors = nodes[2], nodes[0], nodes[1]
    # Both users are connected to a survivor, so only the timers' relay dies: a check-in deadline not yet due
    # and an alarm whose repeat is not yet due, both in the killed relay's shards.
    walker = await hw.register(username=username_in(held[killed.node_id], "tskw"), endpoint=survivors[0])
    raiser = await hw.register(username=username_in(held[killed.node_id], "tskr"), endpoint=survivors[0])
    observer = await hw.register("tsko", endpoint=survivors[1])
    await befriend_all(hw, walker, observer)
    await befriend_all(hw, raiser, observer)
    deadline = int(time.time() * 1000) + 4000
    await walk(hw, walker, observer, checkInBy=deadline)
    await raiser.ok("alarm.raise", text="help")
    raised = await observer.expect_event("alarm", predicate=lambda e: e["alarm"]["from"]["username"] == raiser.username)
    alarm_id = raised["alarm"]["alarmId"]
    try:
        await node_killed(cluster, killed)
        await settled_shards(survivors)
        await expect_once_then_repeat(
            observer, lambda e: missed_check_in(e) and e["alarm"]["from"]["username"] == walker.username,
            "the missed check-in alarm of a killed relay's shard")
        # The raised alarm's repeats, fired by the survivor that took its shard: each once, in order (a copy of
        # repeat 1 from a second relay would have come before repeat 2, an interval later).
        for expected in (1, 2):
            await observer.expect_event("alarm", timeout=ALARM_REPEAT_INTERVAL + 10,
                                        predicate=lambda e, n=expected: e["alarm"]["alarmId"] == alarm_id and e.get("repeat") == n)
        twice = observer.events_of("alarm", lambda e: e["alarm"]["alarmId"] == alarm_id and e.get("repeat") == 1)
        assert twice == [], "repeat 1 of a killed relay's alarm came twice"
        await observer.ok("alarm.ack", alarmId=alarm_id)
    finally:
        await node_back(cluster, killed)
