/// One signed-in device of the user, as `auth.sessions` lists it: the token's id (not the token),
/// and its times in Unix milliseconds.
public struct DeviceSession: Sendable, Equatable {
    public var id: String
    public var createdAt: Int64
    public var lastUsed: Int64
    public var expiresAt: Int64
    /// The token the asking connection signed in with.
    public var isCurrent: Bool

    public init(id: String, createdAt: Int64, lastUsed: Int64, expiresAt: Int64, isCurrent: Bool) {
        self.id = id
        self.createdAt = createdAt
        self.lastUsed = lastUsed
        self.expiresAt = expiresAt
        self.isCurrent = isCurrent
    }

    public init?(json: JSONValue) {
        guard let id = json.string("id"), let createdAt = json.int64("createdAt") else { return nil }
        self.init(id: id, createdAt: createdAt, lastUsed: json.int64("lastUsed") ?? createdAt,
                  expiresAt: json.int64("expiresAt") ?? 0, isCurrent: json.bool("current") ?? false)
    }

    public var json: JSONValue {
        ["id": .string(id), "createdAt": .int(createdAt), "lastUsed": .int(lastUsed), "expiresAt": .int(expiresAt),
         "current": .bool(isCurrent)]
    }
}

/// `auth.sessions`: the account's unexpired tokens, oldest first.
public struct DeviceSessionsReply: ReplyBody, Equatable {
    public var sessions: [DeviceSession]

    public init(sessions: [DeviceSession]) { self.sessions = sessions }

    public var fields: [(String, JSONValue)] { [("sessions", .array(sessions.map(\.json)))] }

    public init?(json: JSONValue) {
        self.init(sessions: json.array("sessions").compactMap(DeviceSession.init(json:)))
    }
}
