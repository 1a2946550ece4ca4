import HomewardProtocol

/// Share links (protocol 1.1): letting someone without an account watch our active session, and
/// watching one ourselves with a link's token.
extension RelayClient {
    /// Creates a link to our session `sessionId`, alive `ttl` seconds (relay default 7200, 60 to 604800,
    /// never past the session's end). The reply's `token` and `url` are shown this once: the relay keeps
    /// only a hash.
    public func createShare(sessionId: String, ttl: Int64? = nil) async throws(RelayClientError) -> ShareInfo {
        try await request(.shareCreate(sessionId: sessionId, ttl: ttl), as: ShareCreateReply.self).share
    }

    /// Our live links, oldest first, without tokens.
    public func shareLinks() async throws(RelayClientError) -> [ShareInfo] {
        try await request(.shareList, as: ShareListReply.self).shares
    }

    /// Ends a link: its viewers get `session.ended` with reason `revoked` and are disconnected.
    public func revokeShare(_ shareId: String) async throws(RelayClientError) {
        try await request(.shareRevoke(shareId: shareId))
    }

    /// Makes this connection a read-only viewer of the session behind `token` (a link's URL fragment).
    /// Must be the connection's first request and needs no account; afterwards `events()` carries the
    /// owner's `pos`, `session.lost`/`session.resumed`, alarms and, at the end, `session.ended`, and
    /// the relay closes the connection with 1000. Every other request then fails with `forbidden`.
    /// An unknown, expired or revoked token fails with `not_found` and the relay closes the connection.
    /// A viewer is not signed in, so a reconnect does not watch again: use a client whose
    /// configuration has reconnection off, and call `watch` on a new one.
    public func watch(token: String) async throws(RelayClientError) -> WatchReply {
        try await request(.watch(token: token), as: WatchReply.self)
    }
}
