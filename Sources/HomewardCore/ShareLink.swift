import HomewardProtocol

/// A share link (protocol 1.1): lets someone without an account watch one follow-me session until
/// `expiresAt`. Only the SHA-256 of its token is kept, so a stolen database cannot open it.
public struct ShareLink: Sendable, Equatable {
    public let id: String
    public let sessionId: String
    public let owner: String
    public let tokenHash: String
    public let createdAt: Int64
    public let expiresAt: Int64

    public init(id: String, sessionId: String, owner: String, tokenHash: String, createdAt: Int64, expiresAt: Int64) {
        self.id = id
        self.sessionId = sessionId
        self.owner = owner
        self.tokenHash = tokenHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    /// The name this link's viewers have in the presence table and in an `Outcome`'s events: it cannot
    /// be a username (`:` is not a username character), so viewers sit in an owner's audience next to
    /// observers and the position fan-out reaches them unchanged.
    public var viewerKey: String { Self.viewerKeyPrefix + id }

    public static let viewerKeyPrefix = "share:"

    public static func isViewerKey(_ name: String) -> Bool { name.hasPrefix(viewerKeyPrefix) }

    /// The link as its owner lists it (no token: it is not kept).
    public var info: ShareInfo {
        ShareInfo(id: id, sessionId: sessionId, createdAt: createdAt, expiresAt: expiresAt)
    }
}

/// The share-link rules' settings: the lifetimes a link may have and where the viewer page is.
public struct ShareSettings: Sendable, Equatable {
    /// Seconds. The contract fixes 60 to 604800 with 7200 by default; `minimumTTL` may be lowered for
    /// tests only (`--share-min-ttl`), so that expiry can be watched without waiting a minute.
    public var defaultTTL: Int64 = 7200
    public var minimumTTL: Int64 = 60
    public var maximumTTL: Int64 = 604_800
    /// The relay's public base URL (no trailing slash); a link's URL is this + `/f#` + its token.
    public var publicURL = "https://localhost:8443"

    public init() {}

    public func url(for token: String) -> String { publicURL + "/f#" + token }
}
