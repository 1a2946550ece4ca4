/// What a sign-in may cost and whom it may push out: failed `hello`s per address, room for a password
/// login, and connections whose token is gone.
extension Relay {
    /// Whether a `hello` from `peer` with the token `hash` is looked at. Past `--hello-failures-per-address`
    /// failures from `peer`, only a token this cache holds as valid is: it costs nothing to check, and the
    /// other devices behind that address keep signing in; any other token is refused (`rate_limited`)
    /// without asking the store (in a cluster an unknown token costs a PostgreSQL read while every other
    /// operation waits). Under the limit, a token this cache does not know is looked for in the store.
    func mayCheckToken(_ hash: String, from peer: String) async -> Bool {
        let now = clock()
        guard signIns.helloFailures.isLimited(peer, now: now) else {
            await refreshIfUnknown(tokenHash: hash)
            return true
        }
        return state.knowsToken(hash) && !state.tokenIsExpired(hash, now: now, lifetime: limits.tokenLifetime)
    }

    /// The token's user, and the change recording its use; an unknown, revoked or expired token counts
    /// as a failure of `peer`.
    func useToken(_ hash: String, from peer: String) throws(RelayError) -> (username: String, changes: [StoreChange]) {
        let now = clock()
        do throws(RelayError) {
            return try state.useToken(hash, now: now, lifetime: limits.tokenLifetime)
        } catch {
            signIns.helloFailures.record(peer, now: now)
            throw error
        }
    }

    /// A password login always gets in, so that whoever holds a stolen token cannot fill
    /// `--max-connections-per-user` and lock the owner out of `auth.revoke`: over the limit, the user's
    /// connections here that signed in first are closed (1008) to make room. `hello` stays limited: a
    /// token alone pushes nobody out.
    func makeRoom(for username: String, signingIn sink: any ClientSink, previous: Authentication?) {
        let already = previous?.username == username ? 1 : 0
        var excess = presence.connectionCount(of: username) - already - limits.maxConnectionsPerUser + 1
        while excess > 0, let oldest = signedInTokens.oldestConnection(of: username, except: sink) {
            detach(username, oldest)
            oldest.close(.policyViolation, reason: Self.replacedByLogin)
            excess -= 1
        }
    }

    static let replacedByLogin = "signed out: a password sign-in needed this connection's place"

    /// After any reload: connections whose token the store no longer has (revoked or dropped by another
    /// relay, whose notice this relay may never have heard) are closed as a revocation would close them.
    func closeConnectionsWithoutToken() {
        let gone = signedInTokens.tokenHashes.filter { !state.knowsToken($0) }
        guard !gone.isEmpty else { return }
        logger.notice("closing connections whose token is gone from the store", metadata: ["tokens": "\(gone.count)"])
        closeConnections(signedInWith: gone)
    }
}
