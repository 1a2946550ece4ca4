/// What a relay caching only its users' part (`CacheMode.connected`) loads at start (`RelayStore.loadActive`): the
/// entities the timers fire on and a share link's viewer signs in with, none of the users' own rows. Users become
/// resident later, slice by slice (`RelayState.admit`).
extension StoredState {
    /// Every active session and alarm (expiry, check-in deadlines, lost contact, repeats), every share link of an
    /// active session (expiry, `watch`), every pause with an end and every meeting point (expiry). No users,
    /// tokens, relations, contacts, subscriptions, standing shares, pauses without an end or messages; no versions
    /// (the users these name are not resident: their versions come with their slices).
    public func active() -> StoredState {
        var active = StoredState()
        active.sessions = sessions
        let sessionIds = Set(sessions.map(\.id))
        active.shares = shares.filter { sessionIds.contains($0.sessionId) }
        active.alarms = alarms
        active.pauses = pauses.filter { $0.until != nil }
        active.meetings = meetings
        return active
    }
}
