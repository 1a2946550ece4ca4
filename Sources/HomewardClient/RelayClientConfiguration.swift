/// Everything a `RelayClient` needs to know before it connects.
public struct RelayClientConfiguration: Sendable {
    public var endpoint: RelayEndpoint
    public var trust: TLSTrust
    public var reconnect: ReconnectPolicy
    /// How long a request waits for its reply, including waiting for a reconnect.
    public var requestTimeout: Duration
    /// TCP connect, TLS handshake and WebSocket upgrade, each.
    public var connectTimeout: Duration
    /// Close a connection that has been silent this long (the relay pings every 25 s).
    public var silenceLimit: Duration
    public var maxMessageBytes: Int

    public init(endpoint: RelayEndpoint, trust: TLSTrust = .system, reconnect: ReconnectPolicy = ReconnectPolicy(),
                requestTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(10),
                silenceLimit: Duration = .seconds(75), maxMessageBytes: Int = 1 << 20) {
        self.endpoint = endpoint
        self.trust = trust
        self.reconnect = reconnect
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.silenceLimit = silenceLimit
        self.maxMessageBytes = maxMessageBytes
    }
}
