/// A follow-me session as clients see it: `{sessionId, owner, note, startedAt, observers, invited}`
/// plus the safety extensions when set (`checkInBy`, `destination`, `expiresAt`).
public struct SessionInfo: Sendable, Equatable {
    public var id: String
    public var owner: UserInfo
    public var note: String?
    /// Unix milliseconds.
    public var startedAt: Int64
    /// Invitees who accepted and now receive the owner's positions.
    public var observers: [String]
    /// Everyone invited, in invitation order.
    public var invited: [String]
    /// Unix milliseconds by which the owner must check in.
    public var checkInBy: Int64?
    public var destination: Destination?
    /// Unix milliseconds at which the session ends by itself.
    public var expiresAt: Int64?

    public init(id: String, owner: UserInfo, note: String?, startedAt: Int64, observers: [String], invited: [String],
                checkInBy: Int64? = nil, destination: Destination? = nil, expiresAt: Int64? = nil) {
        self.id = id
        self.owner = owner
        self.note = note
        self.startedAt = startedAt
        self.observers = observers
        self.invited = invited
        self.checkInBy = checkInBy
        self.destination = destination
        self.expiresAt = expiresAt
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("sessionId", .string(id)),
            ("owner", owner.json),
            ("note", .optional(note)),
            ("startedAt", .int(startedAt)),
            ("observers", .strings(observers)),
            ("invited", .strings(invited)),
        ]
        if let checkInBy { members.append(("checkInBy", .int(checkInBy))) }
        if let destination { members.append(("destination", destination.json)) }
        if let expiresAt { members.append(("expiresAt", .int(expiresAt))) }
        return .object(members)
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("sessionId"), let owner = UserInfo(json: json.object("owner")) else { return nil }
        self.init(id: id, owner: owner, note: json.string("note"), startedAt: json.int64("startedAt") ?? 0,
                  observers: json.strings("observers"), invited: json.strings("invited"),
                  checkInBy: json.int64("checkInBy"),
                  destination: json.object("destination").flatMap { try? Destination(from: $0) },
                  expiresAt: json.int64("expiresAt"))
    }
}
