/// The client's `id` of a request, echoed back as `re`.
public enum RequestID: Sendable, Hashable {
    case int(Int64)
    case string(String)

    /// The longest string `id`, in UTF-8 bytes. Every reply echoes the id, so an unbounded one would let a
    /// client make the relay hold up to a whole message per queued reply.
    public static let maxStringBytes = 128

    public var json: JSONValue {
        switch self {
        case .int(let value): return .int(value)
        case .string(let value): return .string(value)
        }
    }

    init?(_ value: JSONValue) {
        switch value {
        case .int(let integer): self = .int(integer)
        case .string(let string): self = .string(string)
        default: return nil
        }
    }

    /// The `id` member of a request: nil when absent or null. An id of the wrong type or a string over
    /// `maxStringBytes` is an error; its reply carries no `re` (it cannot be echoed, so it is not).
    static func parse(_ raw: JSONValue?) -> Result<RequestID?, ProtocolError> {
        guard let raw, raw != .null else { return .success(nil) }
        guard let id = RequestID(raw) else { return .failure(.badRequest("id must be a string or an integer")) }
        if case .string(let string) = id, string.utf8.count > maxStringBytes {
            return .failure(.badRequest("id strings are limited to \(maxStringBytes) bytes"))
        }
        return .success(id)
    }
}
