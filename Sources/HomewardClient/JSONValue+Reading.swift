import HomewardProtocol

/// Lenient accessors for what the relay sends. Replies are trusted more than requests are on
/// the relay side: a missing optional member reads as nil instead of failing the whole message.
extension JSONValue {
    func string(_ key: String) -> String? { self[key]?.stringValue }

    func int64(_ key: String) -> Int64? {
        switch self[key] {
        case .int(let value)?: return value
        case .double(let value)? where value.rounded() == value && abs(value) < 9e18: return Int64(value)
        default: return nil
        }
    }

    func bool(_ key: String) -> Bool? {
        if case .bool(let value)? = self[key] { return value }
        return nil
    }

    func array(_ key: String) -> [JSONValue] {
        if case .array(let elements)? = self[key] { return elements }
        return []
    }

    func strings(_ key: String) -> [String] { array(key).compactMap(\.stringValue) }

    /// The member `key` when it is an object; nil for null or absent.
    func object(_ key: String) -> JSONValue? {
        if case .object? = self[key] { return self[key] }
        return nil
    }

    /// The object without the reply envelope (`type`, `re`), as scripts want to see a result.
    public var withoutEnvelope: JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(members.filter { $0.0 != "type" && $0.0 != "re" })
    }
}

extension Position {
    /// Reads a position the relay sent, without substituting a time: a position without `ts` is not one.
    init?(relayed json: JSONValue) {
        guard json.int64("ts") != nil, let position = try? Position(from: json, now: 0) else { return nil }
        self = position
    }
}
