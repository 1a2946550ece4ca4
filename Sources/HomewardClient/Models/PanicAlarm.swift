import HomewardProtocol

/// A panic alarm as the relay describes it.
public struct PanicAlarm: Sendable, Equatable {
    public var id: String
    public var from: User
    public var text: String
    /// Where the owner was when it was raised, if known.
    public var position: Position?
    /// Unix milliseconds.
    public var createdAt: Int64
    public var acked: [String]
    /// Raised by the relay on the owner's behalf (a missed check-in).
    public var isAutomatic: Bool

    init?(json: JSONValue?) {
        guard let json, let id = json.string("alarmId"), let from = User(json: json.object("from")) else { return nil }
        self.id = id
        self.from = from
        self.text = json.string("text") ?? ""
        self.position = json.object("position").flatMap { Position(relayed: $0) }
        self.createdAt = json.int64("createdAt") ?? 0
        self.acked = json.strings("acked")
        self.isAutomatic = json.bool("auto") ?? false
    }
}

/// Someone an alarm was sent to, and whether they were online to get it at once.
public struct AlarmRecipient: Sendable, Equatable {
    public var username: String
    public var online: Bool

    public init(username: String, online: Bool) {
        self.username = username
        self.online = online
    }
}

/// The reply to `alarm.raise`.
public struct RaisedAlarm: Sendable, Equatable {
    public var alarm: PanicAlarm
    public var recipients: [AlarmRecipient]
}

/// What an alarm carries when raised: the protocol's own request type, shared with the relay.
public typealias AlarmRequest = Request.AlarmRaise

extension Request.AlarmRaise {
    var fields: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        if let text { fields.append(("text", .string(text))) }
        if let lat { fields.append(("lat", .number(lat))) }
        if let lon { fields.append(("lon", .number(lon))) }
        if let acc { fields.append(("acc", .number(acc))) }
        if let to { fields.append(("to", .strings(to))) }
        return fields
    }
}
