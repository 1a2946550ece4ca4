/// What the Web Push module refuses, with a sentence for the person who sent it.
public enum WebPushError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A subscription key or the VAPID key is malformed.
    case badKey(String)
    /// The plaintext does not fit in one record of a push message (the body would pass 4096 bytes).
    case payloadTooLarge(bytes: Int, limit: Int)
    /// The endpoint is not an absolute http(s) URL with a host.
    case badEndpoint(String)
    /// The VAPID subject is not a `mailto:` or `https:` URI.
    case badSubject(String)
    /// A header value (TTL, Topic) is outside what RFC 8030 allows.
    case badHeader(String)

    public var description: String {
        switch self {
        case .badKey(let why): why
        case .payloadTooLarge(let bytes, let limit): "push payload of \(bytes) bytes is over the limit of \(limit)"
        case .badEndpoint(let why): why
        case .badSubject(let why): why
        case .badHeader(let why): why
        }
    }
}
