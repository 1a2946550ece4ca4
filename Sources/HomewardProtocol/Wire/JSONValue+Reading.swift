/// Lenient accessors for decoding what the relay sends (replies and events). A client trusts the
/// relay more than the relay trusts a request: a missing optional member reads as nil instead of
/// failing the whole message. Requests are read strictly, by `Fields`.
extension JSONValue {
    public func string(_ key: String) -> String? { self[key]?.stringValue }

    /// An integer member; a whole double (as some encoders write them) counts too.
    public func int64(_ key: String) -> Int64? {
        switch self[key] {
        case .int(let value)?: return value
        case .double(let value)? where value.rounded() == value && abs(value) < 9e18: return Int64(value)
        default: return nil
        }
    }

    public func bool(_ key: String) -> Bool? {
        if case .bool(let value)? = self[key] { return value }
        return nil
    }

    /// The member `key` when it is an array; empty otherwise.
    public func array(_ key: String) -> [JSONValue] {
        if case .array(let elements)? = self[key] { return elements }
        return []
    }

    public func strings(_ key: String) -> [String] { array(key).compactMap(\.stringValue) }

    /// The member `key` when it is an object; nil for null or absent.
    public func object(_ key: String) -> JSONValue? {
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
    public init?(relayed json: JSONValue?) {
        guard let json, json.int64("ts") != nil, let position = try? Position(from: json, now: 0) else { return nil }
        self = position
    }
}
