/// A share link as its owner sees it (protocol 1.1): `{shareId, sessionId, createdAt, expiresAt}`, plus
/// `token` and `url` only in the reply to `share.create` (the relay keeps only the token's hash).
public struct ShareInfo: Sendable, Equatable {
    public var id: String
    public var sessionId: String?
    public var createdAt: Int64?
    /// Unix milliseconds at which the link stops working.
    public var expiresAt: Int64
    public var token: String?
    public var url: String?

    public init(id: String, sessionId: String? = nil, createdAt: Int64? = nil, expiresAt: Int64, token: String? = nil,
                url: String? = nil) {
        self.id = id
        self.sessionId = sessionId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.token = token
        self.url = url
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [("shareId", .string(id))]
        if let sessionId { members.append(("sessionId", .string(sessionId))) }
        if let token { members.append(("token", .string(token))) }
        if let url { members.append(("url", .string(url))) }
        if let createdAt { members.append(("createdAt", .int(createdAt))) }
        members.append(("expiresAt", .int(expiresAt)))
        return .object(members)
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("shareId"), let expiresAt = json.int64("expiresAt") else { return nil }
        self.init(id: id, sessionId: json.string("sessionId"), createdAt: json.int64("createdAt"), expiresAt: expiresAt,
                  token: json.string("token"), url: json.string("url"))
    }
}

/// `share.create`: the new link, with its token and URL (shown this once).
public struct ShareCreateReply: ReplyBody, Equatable {
    public var share: ShareInfo

    public init(share: ShareInfo) { self.share = share }

    public var fields: [(String, JSONValue)] { [("share", share.json)] }

    public init?(json: JSONValue) {
        guard let share = ShareInfo(json: json.object("share")) else { return nil }
        self.init(share: share)
    }
}

/// `share.list`: the caller's live links, oldest first, without tokens.
public struct ShareListReply: ReplyBody, Equatable {
    public var shares: [ShareInfo]

    public init(shares: [ShareInfo]) { self.shares = shares }

    public var fields: [(String, JSONValue)] { [("shares", .array(shares.map(\.json)))] }

    public init?(json: JSONValue) {
        self.init(shares: json.array("shares").compactMap { ShareInfo(json: $0) })
    }
}

/// The session as a share-link viewer sees it: `{sessionId, owner, startedAt, expiresAt, destination?,
/// checkInBy?}`. No note and no observers: a viewer has no account and learns only the walk itself.
/// `expiresAt` is when the viewer's link ends (never after the session's own end).
public struct WatchedSession: Sendable, Equatable {
    public var id: String
    public var owner: UserInfo
    public var startedAt: Int64
    public var expiresAt: Int64
    public var destination: Destination?
    public var checkInBy: Int64?

    public init(id: String, owner: UserInfo, startedAt: Int64, expiresAt: Int64, destination: Destination? = nil,
                checkInBy: Int64? = nil) {
        self.id = id
        self.owner = owner
        self.startedAt = startedAt
        self.expiresAt = expiresAt
        self.destination = destination
        self.checkInBy = checkInBy
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("sessionId", .string(id)), ("owner", owner.json), ("startedAt", .int(startedAt)), ("expiresAt", .int(expiresAt)),
        ]
        if let destination { members.append(("destination", destination.json)) }
        if let checkInBy { members.append(("checkInBy", .int(checkInBy))) }
        return .object(members)
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("sessionId"), let owner = UserInfo(json: json.object("owner")),
              let expiresAt = json.int64("expiresAt") else { return nil }
        self.init(id: id, owner: owner, startedAt: json.int64("startedAt") ?? 0, expiresAt: expiresAt,
                  destination: json.object("destination").flatMap { try? Destination(from: $0) },
                  checkInBy: json.int64("checkInBy"))
    }
}

/// `watch`: the session the link shows and the owner's last position, if any.
public struct WatchReply: ReplyBody, Equatable {
    public var session: WatchedSession
    public var lastPosition: Position?

    public init(session: WatchedSession, lastPosition: Position?) {
        self.session = session
        self.lastPosition = lastPosition
    }

    public var fields: [(String, JSONValue)] {
        [("session", session.json)] + (lastPosition.map { [("lastPosition", $0.json)] } ?? [])
    }

    public init?(json: JSONValue) {
        guard let session = WatchedSession(json: json.object("session")) else { return nil }
        self.init(session: session, lastPosition: Position(relayed: json.object("lastPosition")))
    }
}
