import HomewardProtocol

/// Something that happened without being asked: an event from the relay, an error for a
/// request sent without `id`, or a change of the client's own connection.
public struct RelayEvent: Sendable {
    public let kind: Kind
    /// The message as the relay sent it (for connection changes, a synthesized
    /// `{"type": "connection", ...}` object), for printing or for fields this client does not model.
    public let json: JSONValue
    /// When the frame was read, before any queueing above the socket: for latency measurements.
    public let receivedAt: ContinuousClock.Instant

    public init(kind: Kind, json: JSONValue, receivedAt: ContinuousClock.Instant = .now) {
        self.kind = kind
        self.json = json
        self.receivedAt = receivedAt
    }

    /// An event of the contract, with its JSON as the relay would send it.
    public init(_ event: Event, receivedAt: ContinuousClock.Instant = .now) {
        self.init(kind: .event(event), json: event.json, receivedAt: receivedAt)
    }

    public enum Kind: Sendable, Equatable {
        /// An event of the contract, as the wire model decodes it.
        case event(Event)
        /// The relay rejected a request that was sent without an `id` (usually a `pos`).
        case requestFailed(ProtocolError)
        case connection(ConnectionChange)
        /// A type this client does not know, or a known one missing its required members.
        case other(type: String)
    }

    /// The client's own connection.
    public enum ConnectionChange: Sendable, Equatable {
        case disconnected(SocketClosure)
        /// Waiting `delay` before reconnect attempt `attempt` (1-based).
        case reconnecting(attempt: Int, delay: Duration)
        /// Connected and signed in again.
        case reconnected
        /// Reconnected, but the token was refused (revoked by `logout` elsewhere): signed out.
        case signedOut(String)
        /// Gave up after the policy's maximum attempts.
        case gaveUp
    }

    static func connection(_ change: ConnectionChange) -> RelayEvent {
        var members: [(String, JSONValue)] = [("type", "connection")]
        switch change {
        case .disconnected(let closure):
            members.append(("state", "disconnected"))
            if let code = closure.code { members.append(("code", .int(Int64(code)))) }
            members.append(("reason", .string(closure.description)))
        case .reconnecting(let attempt, let delay):
            members.append(("state", "reconnecting"))
            members.append(("attempt", .int(Int64(attempt))))
            members.append(("delayMs", .int(Int64(delay.seconds * 1000))))
        case .reconnected: members.append(("state", "reconnected"))
        case .signedOut(let reason):
            members.append(("state", "signedOut"))
            members.append(("reason", .string(reason)))
        case .gaveUp: members.append(("state", "gaveUp"))
        }
        return RelayEvent(kind: .connection(change), json: .object(members))
    }

    /// Types an event from the relay's JSON.
    init(json: JSONValue, receivedAt: ContinuousClock.Instant) {
        self.json = json
        self.receivedAt = receivedAt
        self.kind = Self.kind(of: json)
    }

    /// Decodes with the wire model's `Event`, the relay's own type.
    private static func kind(of json: JSONValue) -> Kind {
        if json.string("type") == "error" { return .requestFailed(ProtocolError.fromReply(json)) }
        guard let event = Event(json: json) else { return .other(type: json.string("type") ?? "") }
        return .event(event)
    }
}

extension ProtocolError {
    /// Reads an `error` reply. A code this client does not know is kept in the message and
    /// reported as `internal`: the contract's list is closed, so it means a broken relay.
    static func fromReply(_ json: JSONValue) -> ProtocolError {
        let raw = json.string("code") ?? "internal"
        let message = json.string("message") ?? ""
        if let code = ErrorCode(rawValue: raw) { return ProtocolError(code, message) }
        return ProtocolError(.internal, "\(raw): \(message)")
    }
}
