import HomewardProtocol

// INTERIM, for the merge: the rule-side functions of a cache of connected users that the relay calls and that the
// rules' own branch (cache-rules) defines in `RelayState+Residency.swift`, with the same signatures, so that this
// branch builds and runs alone. They name fewer users than the real ones (the sign-in needs only the user, a watch
// the link's owner). Delete this file when that branch is merged: each of these then clashes with the real one.
extension RelayState {
    /// A cache of connected users as it starts: `active` indexed, nobody resident yet.
    public init(connected active: StoredState, makeID: @escaping @Sendable (_ prefix: String) -> String = RandomID.make) {
        self.init(active, makeID: makeID)
        resident = []
    }

    /// The users whose whole part a sign-in's work reads (backlog, alarms delivered, queued messages, the owner back).
    public func usersNeeded(forSignInOf username: String) -> Set<String> { [username] }

    /// The users whose whole part a `watch` with the link of `tokenHash` reads: its owner.
    public func usersNeeded(forWatching tokenHash: String) -> Set<String> {
        guard let id = sharesByHash[tokenHash], let share = shares[id] else { return [] }
        return [sessions[share.sessionId]?.owner ?? share.owner]
    }

    /// The username prefix a search for `query` looks for; nil when it finds nobody.
    public static func searchPrefix(of query: String) -> String? {
        try? Username.normalize(query, field: "query")
    }

    /// `searchUsers`, among `candidates` (read from the store) instead of the cache's users when given.
    public mutating func searchUsers(_ actor: String, _ query: String, now: Int64,
                                     among candidates: [UserProfile]?) throws(RelayError) -> Outcome {
        guard let candidates else { return try searchUsers(actor, query, now: now) }
        guard !searches.isLimited(actor, now: now) else {
            throw .rateLimited("more than \(Self.searchesPerWindow) searches in 15 minutes; try again later")
        }
        searches.record(actor, now: now)
        var outcome = Outcome()
        let prefix = Self.searchPrefix(of: query)
        let matches = prefix.map { prefix in
            candidates.filter { $0.username.hasPrefix(prefix) }.sorted { $0.username < $1.username }.prefix(Self.searchLimit)
        } ?? []
        outcome.reply = UserSearchReply(users: Array(matches)).fields
        return outcome
    }
}
