import Dispatch

/// Other relays' commits applied to this relay's cache (issue 13): a change notice carries the changes its
/// relay committed and the change count each commit took, so a relay whose cache is at the count before
/// applies them (`RelayState.apply`) instead of reading the whole store again. Reloading stays the answer
/// whenever the order is not certain (`NoticeSequencer`): a gap that does not fill within its hold limit, a
/// commit the cache may already hold, a notice without readable changes, a reconnect.
extension Relay {
    /// Other relays' notices, in the order they came (possibly none: a look at those held).
    func handleRemoteNotices(_ notices: [ChangeNotice]) async {
        let now = DispatchTime.now().uptimeNanoseconds
        switch sequencer.take(notices, loaded: state.loadedChangeCount, inOrder: !state.ownWriteAhead, now: now) {
        case .apply(let commits, let ready):
            if !commits.isEmpty { apply(commits) }
            if !ready.isEmpty { await deliverNotices(ready) }
        case .reload(let all):
            await reloadFromStore(afterRemoteChange: true)
            await deliverNotices(all)
        }
        checkHeldNoticesLater()
    }

    /// Applies other relays' commits, then brings what derives from the cache up to date, as a reload does:
    /// the presence table for the users whose audience may have changed, the pending alarms, the timer.
    private func apply(_ commits: [ChangeNotice.Commit]) {
        var touched = Set<String>()
        for commit in commits { touched.formUnion(state.apply(commit)) }
        appliedCommits.increment(by: commits.count)
        syncPresence(owners: touched)
        alarmsPending.record(state.alarms.count)
        armTimer()
    }

    /// While notices are held, looks at them again when the oldest one's wait is over.
    private func checkHeldNoticesLater() {
        guard !heldCheckQueued, let wait = sequencer.remainingHold(now: DispatchTime.now().uptimeNanoseconds) else { return }
        heldCheckQueued = true
        executor.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait))) { [weak self] in
            self?.submit(.checkHeldNotices)
        }
    }

    /// The `checkHeldNotices` command.
    func checkHeldNotices() async {
        heldCheckQueued = false
        await handleRemoteNotices(takeRemoteNotices())
    }
}
