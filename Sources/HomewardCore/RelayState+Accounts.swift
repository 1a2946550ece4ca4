import HomewardProtocol

extension RelayState {
    /// Creates an account; the password is already hashed.
    public mutating func register(username: String, name: String?, passwordHash: String, now: Int64) throws(RelayError) -> Outcome {
        guard users[username] == nil else { throw .conflict("username \(username) is taken") }
        let displayName = name.flatMap { $0.isEmpty ? nil : $0 } ?? username
        let profile = UserProfile(username: username, name: displayName)
        users[username] = profile
        var outcome = Outcome()
        outcome.changes.append(.createUser(profile, passwordHash: passwordHash, at: now))
        return outcome
    }

    /// What a user missed while offline, sent right after each successful authentication.
    public func backlog(for username: String) -> [JSONValue] {
        var messages: [JSONValue] = []
        for requester in (incoming[username] ?? []).sorted() {
            messages.append(Event.friendRequest(from: profile(requester)).json)
        }
        for id in (sessionsByInvitee[username] ?? []).sorted() {
            guard let session = sessions[id], session.state(of: username) == .invited else { continue }
            messages.append(Event.sessionInvite(session.info(owner: profile(session.owner))).json)
        }
        let addressed = (alarmsByRecipient[username] ?? []).compactMap { alarms[$0] }
        for alarm in addressed.sorted(by: { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }) {
            messages.append(Event.alarm(alarm.info(owner: profile(alarm.owner)), repeat: nil).json)
        }
        return messages
    }

    /// Records that the backlog's alarms reached `username`.
    public mutating func markAlarmsDelivered(to username: String, now: Int64) -> [StoreChange] {
        var changes: [StoreChange] = []
        // In order of id, so that the changes do not depend on how the set was built (a cache of connected users
        // builds it from slices).
        for id in (alarmsByRecipient[username] ?? []).sorted() {
            guard var alarm = alarms[id], alarm.deliveredAt[username] == nil else { continue }
            alarm.deliveredAt[username] = now
            alarms[id] = alarm
            noteDeadlines(of: alarm.owner)
            changes.append(.saveAlarm(alarm))
        }
        return changes
    }
}
