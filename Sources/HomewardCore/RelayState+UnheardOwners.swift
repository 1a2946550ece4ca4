/// A cache of connected users that hears only the notices of the users it follows and of the timer shards it holds
/// (`Relay+Following`) hears nothing of other owners: what it held of theirs would go stale (a session ended on another
/// relay, never heard of here) and stay, one entry per session, alarm, link, pause and meeting point of every user ever
/// resident or loaded. So it keeps the entities a start loads (`StoredState.active()`) of those owners only
/// (`Relay.dropUnheardOwners`), and drops the others'.
extension RelayState {
    /// The owners of what a start loads that the cache holds: of an active session (and its links), an alarm, a pause,
    /// a meeting point.
    func activeOwners() -> Set<String> {
        var owners = Set(sessionByOwner.keys)
        owners.formUnion(alarmsByOwner.filter { !$0.value.isEmpty }.keys)
        owners.formUnion(pauses.keys)
        owners.formUnion(meetings.values.map(\.owner))
        return owners
    }

    /// Drops what `owners` own (none resident): their session with its links, alarms, pauses and the meeting points they
    /// proposed, with the time since when each was offline (not stored: `Relay.noteOfflineOwners` counts it again when
    /// their timer shard is taken).
    mutating func dropActive(ownedBy owners: Set<String>) {
        // Dropping is no decision's removal.
        let recording = removedOwners
        removedOwners = nil
        defer { removedOwners = recording }
        for owner in owners {
            if let session = sessionByOwner[owner] {
                for id in sharesBySession[session] ?? [] { unindex(share: id) }
                unindex(session: session)
            }
            for id in alarmsByOwner[owner] ?? [] { unindex(alarm: id) }
            if alarmsByOwner[owner]?.isEmpty == true { alarmsByOwner[owner] = nil }
            for id in meetingsByUser[owner] ?? [] where meetings[id]?.owner == owner { unindex(meeting: id) }
            pauses[owner] = nil
            offlineOwners[owner] = nil
            noteDeadlines(of: owner)
        }
    }
}
