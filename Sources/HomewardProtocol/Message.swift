/// Envelopes of what the relay sends: replies (carrying `re`) and events. The members inside are
/// the wire model's (`ReplyBody`, `Event`).
public enum Message {
    public static func ok(re id: RequestID?, _ fields: [(String, JSONValue)] = []) -> JSONValue {
        var members: [(String, JSONValue)] = [("type", "ok")]
        if let id { members.append(("re", id.json)) }
        members.append(contentsOf: fields)
        return .object(members)
    }

    public static func error(re id: RequestID?, _ error: ProtocolError) -> JSONValue {
        var members: [(String, JSONValue)] = [("type", "error")]
        if let id { members.append(("re", id.json)) }
        members.append(("code", .string(error.code.rawValue)))
        members.append(("message", .string(error.message)))
        return .object(members)
    }

    /// An event's envelope; `Event.json` fills it for every event of the contract.
    public static func event(_ type: String, _ fields: [(String, JSONValue)]) -> JSONValue {
        .object([("type", .string(type))] + fields)
    }
}
