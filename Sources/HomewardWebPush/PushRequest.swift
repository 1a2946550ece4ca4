import Foundation

/// One HTTP POST to send: a Web Push message to a push service, or a signed webhook call. Built as a
/// value so tests can read every header without a network.
public struct PushRequest: Sendable, Equatable {
    public var url: URL
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The address to connect to instead of resolving the URL's host again (an IP literal the caller
    /// vetted): TLS still checks the certificate against the host, and `Host` still names it.
    public var connectTo: String?

    public init(url: URL, headers: [(name: String, value: String)], body: [UInt8], connectTo: String? = nil) {
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTo = connectTo
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.url == rhs.url && lhs.body == rhs.body && lhs.connectTo == rhs.connectTo
            && lhs.headers.map { "\($0.name): \($0.value)" } == rhs.headers.map { "\($0.name): \($0.value)" }
    }

    /// A Web Push message (RFC 8030 section 5): the payload encrypted for the subscription
    /// (RFC 8291), `Content-Encoding: aes128gcm`, `TTL`, `Urgency`, `Topic` when set, and the VAPID
    /// `Authorization` (RFC 8292) for the endpoint's origin.
    public static func webPush(
        endpoint: URL, keys: WebPushSubscriptionKeys, payload: [UInt8], options: PushOptions,
        vapidKey: VAPIDKey, subject: VAPIDSubject, now: Date = Date()
    ) throws(WebPushError) -> PushRequest {
        let audience = try VAPIDToken.origin(of: endpoint)
        let body = try MessageEncryption.encrypt(payload, for: keys)
        let token = VAPIDToken(audience: audience, subject: subject, key: vapidKey, now: now)
        var headers: [(name: String, value: String)] = [
            ("Content-Type", "application/octet-stream"),
            ("Content-Encoding", "aes128gcm"),
            ("TTL", String(options.ttl)),
            ("Urgency", options.urgency.rawValue),
            ("Authorization", VAPIDToken.authorization(jwt: token.jwt, key: vapidKey)),
        ]
        if let topic = options.topic { headers.append(("Topic", topic)) }
        return PushRequest(url: endpoint, headers: headers, body: body)
    }
}
