/// The RFC 8030 headers of one push: how long the push service keeps it (`TTL`), how urgently it
/// wakes the device (`Urgency`), and the `Topic` under which a newer push replaces an older one.
public struct PushOptions: Sendable, Equatable {
    public enum Urgency: String, Sendable, CaseIterable {
        case veryLow = "very-low", low, normal, high
    }

    public let ttl: Int
    public let urgency: Urgency
    public let topic: String?

    /// `ttl` in seconds (0 or more); `topic` at most 32 characters of the base64url alphabet
    /// (RFC 8030 section 5.4).
    public init(ttl: Int, urgency: Urgency = .normal, topic: String? = nil) throws(WebPushError) {
        guard ttl >= 0 else { throw .badHeader("TTL must be 0 or more seconds") }
        if let topic {
            guard !topic.isEmpty, topic.utf8.count <= 32, Base64URL.isAlphabet(topic) else {
                throw .badHeader("a Topic is 1 to 32 characters of the base64url alphabet")
            }
        }
        self.ttl = ttl
        self.urgency = urgency
        self.topic = topic
    }
}
