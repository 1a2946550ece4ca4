"""A relay started with the other --change-notices than the rest of the cluster (a rolling change of the setting): a
relay with --cache connected and notices per user reads hw.changes for it while it runs, and loses none of its commits
(docs/architecture.md, "One mode per cluster"). Only such a relay hears fewer than every notice, so the test needs
HOMEWARD_CACHE=connected; it puts the odd relay back as it was."""

from __future__ import annotations

import asyncio
import os

import pytest

from conftest import eventually, node_back, node_killed


async def test_a_relay_following_its_users_hears_every_commit_of_a_relay_of_the_other_notice_mode(hw, cluster, nodes):
    if os.environ.get("HOMEWARD_CACHE", "whole") != "connected":
        pytest.skip("with --cache whole every relay reads every notice on hw.changes whatever the mode")
    cluster_mode = os.environ.get("HOMEWARD_CHANGE_NOTICES", "all")
    odd = nodes[0]
    odd_mode = "all" if cluster_mode == "per-user" else "per-user"
    # The relay publishing on hw.changes alone writes; the one hearing only the users it follows reads.
    writer, reader = (odd, nodes[1]) if odd_mode == "all" else (nodes[1], odd)
    flag = ["--change-notices", odd_mode]
    await node_killed(cluster, odd)
    odd.extra_args = odd.extra_args + flag
    try:
        reader.mark_log()
        await node_back(cluster, odd)

        async def reads_hw_changes():
            return "reading hw.changes for that relay's notices" in reader.log_since_mark()
        await eventually("the reader to take hw.changes", reads_hw_changes, timeout=10)

        sender = await hw.register("modesender", endpoint=writer)
        recipient = await hw.register("moderecipient", endpoint=reader)
        # The request heard on the reader, applied to its cache (the accept is decided there), and so on.
        await hw.befriend(sender, recipient)
        sid = (await sender.ok("session.start", invite=[recipient.username]))["session"]["sessionId"]
        await recipient.expect_event("session.invite", timeout=5, predicate=lambda e: e["session"]["sessionId"] == sid)
        await recipient.ok("session.accept", sessionId=sid)
        await sender.ok("session.end", sessionId=sid)
        await recipient.expect_event("session.ended", timeout=5, predicate=lambda e: e.get("sessionId") == sid)
        await asyncio.gather(sender.close(), recipient.close())
    finally:
        odd.extra_args = [a for a in odd.extra_args if a not in flag]
        await node_killed(cluster, odd)
        await node_back(cluster, odd)

    if reader is not odd:
        async def stopped_reading():
            return "stopped reading hw.changes" in reader.log_since_mark()
        await eventually("the reader to drop hw.changes once the odd relay runs the cluster's mode", stopped_reading,
                         timeout=10)
