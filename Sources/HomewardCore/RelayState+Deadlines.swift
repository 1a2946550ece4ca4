/// The timers' index (`DeadlineIndex`): each owner's earliest deadline is noted wherever what they own gets a deadline
/// or an earlier one (a session, alarm, share link, meeting point or pause indexed or saved, an owner going offline);
/// what only removes or postpones one is left to the check of the entry when it comes to the front. The relay asks
/// the index when its timer fires next (`nextDeadlineFromIndex`) and whose work is due (`ownersDue(at:shards:limit:)`);
/// `nextDeadline(in:)` walks everything and is what the index answers (debug builds check each answer against it).
extension RelayState {
    /// The earliest deadline of what `owner` owns, attributed as `nextDeadline(in:)` attributes them.
    func deadline(of owner: String) -> Int64? {
        var next: Int64?
        func consider(_ time: Int64?) {
            if let time, time < next ?? .max { next = time }
        }
        for session in sessions(ownedBy: owner) {
            consider(session.expiresAt)
            consider(session.checkInBy)
            if session.lostSince == nil, let since = offlineOwners[owner] { consider(since + safety.lostContactGrace) }
        }
        for alarm in alarms(ownedBy: owner) { consider(alarm.nextRepeatAt) }
        for share in shares(ownedBy: owner) { consider(share.expiresAt) }
        for pause in (pauses[owner] ?? [:]).values { consider(pause.until) }
        for meeting in meetings(ownedBy: owner) { consider(meeting.expiresAt) }
        return next
    }

    /// What `owner` owns may have a new or earlier deadline: notes their earliest one in the index.
    mutating func noteDeadlines(of owner: String) {
        deadlines.note(owner, deadline: deadline(of: owner))
    }

    /// Indexes every owner's deadlines afresh (the lost-contact grace changed).
    mutating func noteAllDeadlines() {
        deadlines = DeadlineIndex()
        var owners = Set(sessions.values.map(\.owner))
        owners.formUnion(alarms.values.map(\.owner))
        owners.formUnion(shares.values.map(\.owner))
        owners.formUnion(pauses.keys)
        owners.formUnion(meetings.values.map(\.owner))
        for owner in owners { noteDeadlines(of: owner) }
    }

    /// The earliest time anything in `shards` is scheduled, if anything is: `nextDeadline(in:)`, found through the index.
    public mutating func nextDeadlineFromIndex(in shards: TimerShards = .all) -> Int64? {
        var next: Int64?
        while let entry = deadlines.first(in: shards) {
            let actual = deadline(of: entry.owner)
            if actual == entry.deadline {
                next = actual
                break
            }
            // Later (or none) since it was noted.
            deadlines.note(entry.owner, deadline: actual)
        }
        assert(next == nextDeadline(in: shards), "the deadline index disagrees with the deadlines")
        return next
    }

    /// Up to `limit` owners in `shards` with work due at `now` (`fireDue`), earliest due first, and whether more have:
    /// what a storm of due work is split by, a batch of owners at a time (`Relay.fireDueWork`).
    public mutating func ownersDue(at now: Int64, shards: TimerShards = .all, limit: Int) -> (owners: [String], more: Bool) {
        var owners: [String] = []
        var taken: [String] = []
        var more = false
        while let entry = deadlines.takeDue(at: now, in: shards) {
            taken.append(entry.owner)
            guard let actual = deadline(of: entry.owner), actual <= now else { continue }
            if owners.count == limit {
                more = true
                break
            }
            owners.append(entry.owner)
        }
        // Back in the index, as they are now (firing them changes their deadlines, and notes them again).
        for owner in taken { noteDeadlines(of: owner) }
        return (owners, more)
    }

    /// What has a deadline among what `due` fires: with `due.only` (a batch of owners, `Relay.fireDueWork`) what those
    /// owners own, found through the indexes at the cost of what they own; otherwise everything, walked.
    func dueCandidates(_ due: DueOwners) -> DueCandidates {
        guard let only = due.only else {
            return DueCandidates(sessions: Array(sessions.values), alarms: Array(alarms.values), shares: Array(shares.values),
                                 pauseOwners: Array(pauses.keys), meetings: Array(meetings.values))
        }
        var candidates = DueCandidates()
        for owner in only where due.shards.owns(owner) {
            candidates.sessions += sessions(ownedBy: owner)
            candidates.alarms += alarms(ownedBy: owner)
            candidates.shares += shares(ownedBy: owner)
            if pauses[owner] != nil { candidates.pauseOwners.append(owner) }
            candidates.meetings += meetings(ownedBy: owner)
        }
        return candidates
    }

    private func sessions(ownedBy owner: String) -> [FollowSession] {
        sessionByOwner[owner].flatMap { sessions[$0] }.map { [$0] } ?? []
    }

    private func alarms(ownedBy owner: String) -> [Alarm] {
        (alarmsByOwner[owner] ?? []).compactMap { alarms[$0] }
    }

    /// A link's owner is its session's.
    private func shares(ownedBy owner: String) -> [ShareLink] {
        guard let session = sessionByOwner[owner] else { return [] }
        return (sharesBySession[session] ?? []).compactMap { shares[$0] }.filter { $0.owner == owner }
    }

    private func meetings(ownedBy owner: String) -> [MeetingPoint] {
        (meetingsByUser[owner] ?? []).compactMap { meetings[$0] }.filter { $0.owner == owner }
    }
}

/// The entities with deadlines one firing looks at (`RelayState.dueCandidates`); each is fired only if its owner is in
/// the firing's `DueOwners`.
struct DueCandidates {
    var sessions: [FollowSession] = []
    var alarms: [Alarm] = []
    var shares: [ShareLink] = []
    var pauseOwners: [String] = []
    var meetings: [MeetingPoint] = []
}
