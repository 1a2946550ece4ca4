import HomewardProtocol

/// A follow-me session: one owner asking friends to watch them walk.
public struct FollowMeSession: Sendable, Equatable {
    public var id: String
    public var owner: User
    public var note: String?
    /// Unix milliseconds.
    public var startedAt: Int64
    /// Invitees who accepted and now receive the owner's positions.
    public var observers: [String]
    /// Everyone invited, in invitation order.
    public var invited: [String]
    /// Safety extensions, when the session has them: the check-in deadline and expiry (Unix
    /// milliseconds) and where the walk ends.
    public var checkInBy: Int64?
    public var expiresAt: Int64?
    public var destination: Destination?

    init?(json: JSONValue?) {
        guard let json, let id = json.string("sessionId"), let owner = User(json: json.object("owner")) else { return nil }
        self.id = id
        self.owner = owner
        self.note = json.string("note")
        self.startedAt = json.int64("startedAt") ?? 0
        self.observers = json.strings("observers")
        self.invited = json.strings("invited")
        self.checkInBy = json.int64("checkInBy")
        self.expiresAt = json.int64("expiresAt")
        self.destination = json.object("destination").flatMap { try? Destination(from: $0) }
    }
}

/// The reply to `session.list`.
public struct SessionList: Sendable, Equatable {
    /// Our own active session, if any.
    public var own: FollowMeSession?
    /// Sessions we accepted.
    public var following: [FollowMeSession]
    /// Sessions we are invited to and have not answered.
    public var invites: [FollowMeSession]

    init(json: JSONValue) {
        own = FollowMeSession(json: json.object("own"))
        following = json.array("following").compactMap { FollowMeSession(json: $0) }
        invites = json.array("invites").compactMap { FollowMeSession(json: $0) }
    }
}

extension SessionOptions {
    /// The members of a `session.start` request. The safety extensions are sent only when set.
    var requestFields: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        if let invite { fields.append(("invite", .strings(invite))) }
        if let note { fields.append(("note", .string(note))) }
        if let checkInBy { fields.append(("checkInBy", .int(checkInBy))) }
        if let destination { fields.append(("destination", destination.json)) }
        if let ttl { fields.append(("ttl", .int(ttl))) }
        return fields
    }
}
