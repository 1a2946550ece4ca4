/// A panic alarm as its recipients see it: `{alarmId, from, text, position, createdAt, acked}`, and
/// `auto: true` when the relay raised it for the owner (a missed check-in).
public struct AlarmInfo: Sendable, Equatable {
    public var id: String
    public var from: UserInfo
    public var text: String
    /// Where the owner was when it was raised, if known.
    public var position: Position?
    /// Unix milliseconds.
    public var createdAt: Int64
    public var acked: [String]
    /// Raised by the relay on the owner's behalf (a missed check-in).
    public var isAutomatic: Bool

    public init(id: String, from: UserInfo, text: String, position: Position?, createdAt: Int64, acked: [String],
                isAutomatic: Bool = false) {
        self.id = id
        self.from = from
        self.text = text
        self.position = position
        self.createdAt = createdAt
        self.acked = acked
        self.isAutomatic = isAutomatic
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("alarmId", .string(id)),
            ("from", from.json),
            ("text", .string(text)),
            ("position", position?.json ?? .null),
            ("createdAt", .int(createdAt)),
            ("acked", .strings(acked)),
        ]
        if isAutomatic { members.append(("auto", true)) }
        return .object(members)
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("alarmId"), let from = UserInfo(json: json.object("from")) else { return nil }
        self.init(id: id, from: from, text: json.string("text") ?? "", position: Position(relayed: json.object("position")),
                  createdAt: json.int64("createdAt") ?? 0, acked: json.strings("acked"), isAutomatic: json.bool("auto") ?? false)
    }
}
