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

    public enum Kind: Sendable, Equatable {
        case position(PositionReport)
        case friendRequest(from: User)
        case friendAdded(User)
        case friendDeclined(username: String)
        case friendRemoved(username: String)
        case presence(PresenceChange)
        case sessionInvite(FollowMeSession)
        case sessionAccepted(sessionId: String, by: String)
        case sessionDeclined(sessionId: String, by: String)
        case sessionLeft(sessionId: String, by: String)
        case sessionEnded(sessionId: String, reason: String)
        case sessionLost(sessionId: String, lastPosition: Position?, since: Int64?)
        case sessionResumed(sessionId: String)
        /// `repeat` counts the relay's re-sends of an unacknowledged alarm.
        case alarm(PanicAlarm, repeat: Int?)
        case alarmAcked(alarmId: String, by: String)
        case alarmCancelled(alarmId: String, reason: String)
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

    /// The client's view of an event of the wire model (decoded by `Event`, the relay's own type).
    private static func kind(of json: JSONValue) -> Kind {
        if json.string("type") == "error" { return .requestFailed(ProtocolError.fromReply(json)) }
        guard let event = Event(json: json) else { return .other(type: json.string("type") ?? "") }
        switch event {
        case .position(let from, let position): return .position(PositionReport(from: from, position: position))
        case .friendRequest(let from): return .friendRequest(from: from)
        case .friendAdded(let user): return .friendAdded(user)
        case .friendDeclined(let username): return .friendDeclined(username: username)
        case .friendRemoved(let username): return .friendRemoved(username: username)
        case .presence(let username, let online, let lastSeen):
            return .presence(PresenceChange(username: username, online: online, lastSeen: lastSeen))
        case .sessionInvite(let session): return .sessionInvite(session)
        case .sessionAccepted(let id, let by): return .sessionAccepted(sessionId: id, by: by)
        case .sessionDeclined(let id, let by): return .sessionDeclined(sessionId: id, by: by)
        case .sessionLeft(let id, let by): return .sessionLeft(sessionId: id, by: by)
        case .sessionEnded(let id, let reason): return .sessionEnded(sessionId: id, reason: reason)
        case .sessionLost(let id, let lastPosition, let since): return .sessionLost(sessionId: id, lastPosition: lastPosition, since: since)
        case .sessionResumed(let id): return .sessionResumed(sessionId: id)
        case .alarm(let alarm, let count): return .alarm(alarm, repeat: count)
        case .alarmAcked(let id, let by): return .alarmAcked(alarmId: id, by: by)
        case .alarmCancelled(let id, let reason): return .alarmCancelled(alarmId: id, reason: reason)
        }
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
