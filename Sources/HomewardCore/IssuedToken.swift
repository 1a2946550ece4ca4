/// A bearer token the relay issued, as stored: its hash (the token itself is never kept), whose it is,
/// and when it was issued and last used. It expires `lifetime` after its last use (sliding).
public struct IssuedToken: Sendable, Equatable {
    public let hash: String
    public let username: String
    public let createdAt: Int64
    public var lastUsed: Int64

    public init(hash: String, username: String, createdAt: Int64, lastUsed: Int64) {
        self.hash = hash
        self.username = username
        self.createdAt = createdAt
        self.lastUsed = lastUsed
    }

    /// What `auth.sessions` shows and `auth.revoke` takes: a prefix of the hash. It names the token
    /// without being it: signing in needs the token, and the hash of 256 random bits cannot be reversed.
    public var id: String { "tk_" + hash.prefix(16) }

    public func expiresAt(lifetime: Int64) -> Int64 { lastUsed + lifetime }

    public func isExpired(at now: Int64, lifetime: Int64) -> Bool { now >= expiresAt(lifetime: lifetime) }
}
