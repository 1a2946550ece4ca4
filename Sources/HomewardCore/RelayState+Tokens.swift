import HomewardProtocol

/// Sign-in tokens: one per `register`/`login` (a device), expiring after `lifetime` without use.
extension RelayState {
    /// A token's last use is stored at most this often: a device reconnecting every few seconds must
    /// not cost a commit each time. Expiry is therefore accurate to a minute.
    public static let tokenUseWriteInterval: Int64 = 60_000

    /// Records a newly minted token and drops the user's expired ones; the returned changes store both.
    public mutating func issueToken(_ hash: String, to username: String, now: Int64, lifetime: Int64) -> [StoreChange] {
        var changes: [StoreChange] = []
        for old in (tokensByUser[username] ?? []).sorted() where tokens[old]?.isExpired(at: now, lifetime: lifetime) ?? false {
            changes += forget(old)
        }
        remember(IssuedToken(hash: hash, username: username, createdAt: now, lastUsed: now))
        changes.append(.createToken(hash: hash, username: username, at: now))
        return changes
    }

    /// The user a token signs in, extending its lifetime. Unknown, revoked and expired tokens are all
    /// `unauthenticated` with the same message. The changes store the use (or drop the expired token).
    /// Whether this cache holds the token (revoked and unknown ones are not held).
    public func knowsToken(_ hash: String) -> Bool { tokens[hash] != nil }

    /// Whether this cache holds the token as expired (its last use may be newer in the store).
    func tokenIsExpired(_ hash: String, now: Int64, lifetime: Int64) -> Bool {
        tokens[hash]?.isExpired(at: now, lifetime: lifetime) ?? false
    }

    public mutating func useToken(_ hash: String, now: Int64, lifetime: Int64) throws(RelayError) -> (username: String, changes: [StoreChange]) {
        guard var token = tokens[hash], users[token.username] != nil else {
            throw .unauthenticated("unknown, revoked or expired token")
        }
        // Kept until the user's next login drops it, so that this stays a lookup with no write.
        guard !token.isExpired(at: now, lifetime: lifetime) else { throw .unauthenticated("unknown, revoked or expired token") }
        var changes: [StoreChange] = []
        if now - token.lastUsed >= Self.tokenUseWriteInterval {
            token.lastUsed = now
            tokens[hash] = token
            changes.append(.useToken(hash: hash, at: now))
        }
        return (token.username, changes)
    }

    /// `auth.sessions`: the user's unexpired tokens, oldest first, marking the one this connection used.
    public func tokenList(_ actor: String, current: String, now: Int64, lifetime: Int64) -> Outcome {
        var outcome = Outcome()
        let live = (tokensByUser[actor] ?? []).compactMap { tokens[$0] }.filter { !$0.isExpired(at: now, lifetime: lifetime) }
        outcome.reply = DeviceSessionsReply(sessions: live.sorted { ($0.createdAt, $0.hash) < ($1.createdAt, $1.hash) }.map { token in
            DeviceSession(id: token.id, createdAt: token.createdAt, lastUsed: token.lastUsed,
                          expiresAt: token.expiresAt(lifetime: lifetime), isCurrent: token.hash == current)
        }).fields
        return outcome
    }

    /// `auth.revoke`: revokes one of the user's own tokens by its id.
    public mutating func revokeToken(_ actor: String, id: String) throws(RelayError) -> Outcome {
        guard let hash = (tokensByUser[actor] ?? []).first(where: { tokens[$0]?.id == id }) else {
            throw .notFound("no session \(id)")
        }
        var outcome = Outcome()
        outcome.changes = forget(hash)
        return outcome
    }

    /// `logout`: revokes the connection's token, or with `all` every token of the user.
    public mutating func logOut(_ actor: String, token: String, all: Bool) -> Outcome {
        var outcome = Outcome()
        let hashes = all ? (tokensByUser[actor] ?? []).sorted() : [token]
        for hash in hashes {
            outcome.changes += forget(hash)
        }
        return outcome
    }

    mutating func remember(_ token: IssuedToken) {
        tokens[token.hash] = token
        tokensByUser[token.username, default: []].insert(token.hash)
    }

    /// Ends a sign-in: the token, and the push subscriptions that end with it. The changes store both.
    private mutating func forget(_ hash: String) -> [StoreChange] {
        guard let token = tokens.removeValue(forKey: hash) else { return [.revokeToken(hash: hash)] }
        noteRemoved(.token(hash), token.username)
        tokensByUser[token.username]?.remove(hash)
        return endPushSubscriptions(ofToken: hash, username: token.username) + [.revokeToken(hash: hash)]
    }
}
