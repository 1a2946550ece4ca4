/// Builders for what the relay sends: replies (carrying `re`) and events.
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

    public static func event(_ type: String, _ fields: [(String, JSONValue)]) -> JSONValue {
        .object([("type", .string(type))] + fields)
    }

    /// A `pos` event for observers: the sender's name, then the position's members.
    public static func position(from username: String, _ position: Position) -> JSONValue {
        .object([("type", "pos"), ("from", .string(username))] + position.jsonMembers())
    }
}
