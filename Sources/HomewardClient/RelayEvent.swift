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

    private static func kind(of json: JSONValue) -> Kind {
        let type = json.string("type") ?? ""
        let sessionId = json.string("sessionId")
        let by = json.string("by")
        switch type {
        case "pos":
            if let from = json.string("from"), let position = Position(relayed: json) {
                return .position(PositionReport(from: from, position: position))
            }
        case "friend.request":
            if let user = User(json: json.object("from")) { return .friendRequest(from: user) }
        case "friend.added":
            if let user = User(json: json.object("user")) { return .friendAdded(user) }
        case "friend.declined":
            if let name = json.string("username") { return .friendDeclined(username: name) }
        case "friend.removed":
            if let name = json.string("username") { return .friendRemoved(username: name) }
        case "presence":
            if let name = json.string("username") {
                return .presence(PresenceChange(username: name, online: json.bool("online") ?? false, lastSeen: json.int64("lastSeen")))
            }
        case "session.invite":
            if let session = FollowMeSession(json: json.object("session")) { return .sessionInvite(session) }
        case "session.accepted":
            if let sessionId, let by { return .sessionAccepted(sessionId: sessionId, by: by) }
        case "session.declined":
            if let sessionId, let by { return .sessionDeclined(sessionId: sessionId, by: by) }
        case "session.left":
            if let sessionId, let by { return .sessionLeft(sessionId: sessionId, by: by) }
        case "session.ended":
            if let sessionId { return .sessionEnded(sessionId: sessionId, reason: json.string("reason") ?? "ended") }
        case "session.lost":
            if let sessionId {
                let last = json.object("lastPosition").flatMap { Position(relayed: $0) }
                return .sessionLost(sessionId: sessionId, lastPosition: last, since: json.int64("since"))
            }
        case "session.resumed":
            if let sessionId { return .sessionResumed(sessionId: sessionId) }
        case "alarm":
            if let alarm = PanicAlarm(json: json.object("alarm")) {
                return .alarm(alarm, repeat: json.int64("repeat").map { Int($0) })
            }
        case "alarm.acked":
            if let id = json.string("alarmId"), let by { return .alarmAcked(alarmId: id, by: by) }
        case "alarm.cancelled":
            if let id = json.string("alarmId") { return .alarmCancelled(alarmId: id, reason: json.string("reason") ?? "cancelled") }
        case "error":
            return .requestFailed(ProtocolError.fromReply(json))
        default:
            break
        }
        return .other(type: type)
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
