/// The client's `id` of a request, echoed back as `re`.
public enum RequestID: Sendable, Hashable {
    case int(Int64)
    case string(String)

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
}
