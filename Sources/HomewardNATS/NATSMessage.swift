import NIOCore

/// One message delivered to a subscription (`MSG`, or `HMSG` whose headers are kept raw).
public struct NATSMessage: Sendable, Equatable {
    public var subject: String
    /// The subscription id the server delivered it to.
    public var subscriptionID: UInt64
    public var replyTo: String?
    /// The NATS/1.0 header block as sent (only from `HMSG`; this client does not ask for headers).
    public var headers: ByteBuffer?
    public var payload: ByteBuffer

    public init(subject: String, subscriptionID: UInt64, replyTo: String? = nil, headers: ByteBuffer? = nil, payload: ByteBuffer) {
        self.subject = subject
        self.subscriptionID = subscriptionID
        self.replyTo = replyTo
        self.headers = headers
        self.payload = payload
    }

    /// The payload as UTF-8 text (invalid bytes replaced).
    public var payloadString: String { String(buffer: payload) }
}

/// The fields of the server's `INFO` this client uses; the rest is ignored.
public struct NATSServerInfo: Sendable, Equatable, Decodable {
    public var serverID: String?
    public var version: String?
    /// Largest payload the server accepts; larger publishes fail before they are sent.
    public var maxPayload: Int?
    public var authRequired: Bool?
    public var headers: Bool?

    public init(serverID: String? = nil, version: String? = nil, maxPayload: Int? = nil, authRequired: Bool? = nil, headers: Bool? = nil) {
        self.serverID = serverID
        self.version = version
        self.maxPayload = maxPayload
        self.authRequired = authRequired
        self.headers = headers
    }

    enum CodingKeys: String, CodingKey {
        case serverID = "server_id"
        case version
        case maxPayload = "max_payload"
        case authRequired = "auth_required"
        case headers
    }
}
