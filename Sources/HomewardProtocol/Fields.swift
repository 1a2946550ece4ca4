/// Typed access to a request's members, with the contract's `bad_request` for each way a field can be wrong.
public struct Fields: Sendable {
    public let object: JSONValue

    public init(_ object: JSONValue) { self.object = object }

    public func has(_ key: String) -> Bool {
        if let value = object[key], value != .null { return true }
        return false
    }

    public func string(_ key: String, maxLength: Int = 1024) throws(ProtocolError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard case .string(let string) = value else { throw .badRequest("\(key) must be a string") }
        // Counted in Unicode scalars: counting grapheme clusters let one "character" carry thousands of
        // combining marks (a 1-character name of 60 KB).
        guard string.unicodeScalars.count <= maxLength else { throw .badRequest("\(key) is longer than \(maxLength) characters") }
        return string
    }

    public func requiredString(_ key: String, maxLength: Int = 1024) throws(ProtocolError) -> String {
        guard let string = try string(key, maxLength: maxLength) else { throw .badRequest("\(key) is required") }
        return string
    }

    public func bool(_ key: String) throws(ProtocolError) -> Bool? {
        guard let value = object[key], value != .null else { return nil }
        guard case .bool(let flag) = value else { throw .badRequest("\(key) must be true or false") }
        return flag
    }

    public func number(_ key: String, in range: ClosedRange<Double>) throws(ProtocolError) -> Double? {
        guard let value = object[key], value != .null else { return nil }
        guard let number = value.numberValue else { throw .badRequest("\(key) must be a number") }
        guard number.isFinite, range.contains(number) else { throw .badRequest("\(key) is out of range") }
        return number
    }

    public func requiredNumber(_ key: String, in range: ClosedRange<Double>) throws(ProtocolError) -> Double {
        guard let number = try number(key, in: range) else { throw .badRequest("\(key) is required") }
        return number
    }

    /// A whole number of milliseconds or seconds; a fraction is out of range.
    public func integer(_ key: String, in range: ClosedRange<Int64>) throws(ProtocolError) -> Int64? {
        guard let value = object[key], value != .null else { return nil }
        let integer: Int64
        switch value {
        case .int(let i): integer = i
        case .double(let d) where d.rounded() == d && abs(d) < 9e18: integer = Int64(d)
        case .double: throw .badRequest("\(key) must be a whole number")
        default: throw .badRequest("\(key) must be a number")
        }
        guard range.contains(integer) else { throw .badRequest("\(key) is out of range") }
        return integer
    }

    public func timestamp(_ key: String) throws(ProtocolError) -> Int64? {
        try integer(key, in: 0...Int64(9_999_999_999_999))
    }

    public func stringArray(_ key: String, maxCount: Int = 1000) throws(ProtocolError) -> [String]? {
        guard let value = object[key], value != .null else { return nil }
        guard case .array(let elements) = value else { throw .badRequest("\(key) must be an array of strings") }
        guard elements.count <= maxCount else { throw .badRequest("\(key) has more than \(maxCount) entries") }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for element in elements {
            guard case .string(let string) = element else { throw .badRequest("\(key) must be an array of strings") }
            strings.append(string)
        }
        return strings
    }

    public func username(_ key: String) throws(ProtocolError) -> String {
        try Username.normalize(requiredString(key, maxLength: 64), field: key)
    }

    public func usernames(_ key: String) throws(ProtocolError) -> [String]? {
        guard let names = try stringArray(key) else { return nil }
        var seen = Set<String>()
        var result: [String] = []
        for name in names {
            let normalized = try Username.normalize(name, field: key)
            if seen.insert(normalized).inserted { result.append(normalized) }
        }
        return result
    }

    public func identifier(_ key: String) throws(ProtocolError) -> String {
        try requiredString(key, maxLength: 128)
    }
}
