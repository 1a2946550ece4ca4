import Dispatch

/// Other relays' commits applied to this relay's cache: a change notice carries the changes its relay
/// committed and the versions each commit gave the users it concerns, so a relay whose cache holds every
/// earlier write about those users applies them (`RelayState.apply`) instead of reading the whole store
/// again. Reloading stays the answer whenever the order is not certain (`NoticeSequencer`): a gap that does
/// not fill within its hold limit, a notice without readable changes, a reconnect.
extension Relay {
    /// Other relays' notices, in the order they came (possibly none: a look at those held).
    func handleRemoteNotices(_ notices: [ChangeNotice]) async {
        let now = DispatchTime.now().uptimeNanoseconds
        switch cluster.sequencer.take(notices, versions: versions, complete: state.resident == nil, followed: placedBy, now: now) {
        case .apply(let commits, let ready):
            if !commits.isEmpty { await apply(commits) }
            if !ready.isEmpty { await deliverNotices(ready) }
        case .reload(let all):
            await reloadFromStore(afterRemoteChange: true)
            await deliverNotices(all)
        case .repair(let commits, let ready):
            if !commits.isEmpty { await apply(commits) }
            if !ready.isEmpty { await deliverNotices(ready) }
            // The slices read back hold the commits the held notices waited for: those are dropped from them, and the
            // rest taken again.
            if await repairGap() {
                await handleRemoteNotices([])
                return
            }
        }
        checkHeldNoticesLater()
    }

    /// Applies other relays' commits, then brings what derives from the cache up to date, as a reload does:
    /// the presence table for the users whose audience may have changed, the pending alarms, the timer.
    private func apply(_ commits: [ChangeNotice.Commit]) async {
        var touched = Set<String>()
        for commit in commits {
            touched.formUnion(state.apply(commit.changes))
            if let moved = commit.versions { writes.versionsMoved(moved) }
        }
        cluster.counters.appliedCommits.increment(by: commits.count)
        syncPresence(owners: touched)
        counters.alarmsPending.record(state.alarms.count)
        armTimer()
        // An owner that now has a part in a resident's (an invite) is followed from here on; the others' entities are
        // dropped again where nothing more of them is heard (commits taken from `hw.changes`).
        await followOwners(namedBy: commits)
        dropUnheardOwners(among: Set(commits.flatMap { ($0.versions ?? [:]).keys }))
    }

    /// While notices are held, looks at them again when the oldest one's wait is over.
    private func checkHeldNoticesLater() {
        guard !cluster.heldCheckQueued, let wait = cluster.sequencer.remainingHold(now: DispatchTime.now().uptimeNanoseconds) else { return }
        cluster.heldCheckQueued = true
        executor.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait))) { [weak self] in
            self?.submit(.checkHeldNotices)
        }
    }

    /// The `checkHeldNotices` command.
    func checkHeldNotices() async {
        cluster.heldCheckQueued = false
        await handleRemoteNotices(takeRemoteNotices())
    }
}
