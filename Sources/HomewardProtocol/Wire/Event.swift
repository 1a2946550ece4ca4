/// Everything the relay sends without being asked, one case per event of docs/protocol.md.
/// `json` is the one encoder (the relay's) and `init?(json:)` the one decoder (every client's).
public enum Event: Sendable, Equatable {
    case position(from: String, Position)
    case friendRequest(from: UserInfo)
    case friendAdded(UserInfo)
    case friendDeclined(username: String)
    case friendRemoved(username: String)
    case presence(username: String, online: Bool, lastSeen: Int64?)
    case sessionInvite(SessionInfo)
    case sessionAccepted(sessionId: String, by: String)
    case sessionDeclined(sessionId: String, by: String)
    case sessionLeft(sessionId: String, by: String)
    case sessionEnded(sessionId: String, reason: String)
    case sessionLost(sessionId: String, lastPosition: Position?, since: Int64?)
    case sessionResumed(sessionId: String)
    /// `repeat` counts the relay's re-sends of an unacknowledged alarm (nil the first time).
    case alarm(AlarmInfo, repeat: Int?)
    case alarmAcked(alarmId: String, by: String)
    case alarmCancelled(alarmId: String, reason: String)
    /// What a share-link viewer gets for `alarm.acked` (protocol 1.1 names it so for viewers).
    case alarmAcknowledged(alarmId: String, by: String)

    public var type: String {
        switch self {
        case .position: return "pos"
        case .friendRequest: return "friend.request"
        case .friendAdded: return "friend.added"
        case .friendDeclined: return "friend.declined"
        case .friendRemoved: return "friend.removed"
        case .presence: return "presence"
        case .sessionInvite: return "session.invite"
        case .sessionAccepted: return "session.accepted"
        case .sessionDeclined: return "session.declined"
        case .sessionLeft: return "session.left"
        case .sessionEnded: return "session.ended"
        case .sessionLost: return "session.lost"
        case .sessionResumed: return "session.resumed"
        case .alarm: return "alarm"
        case .alarmAcked: return "alarm.acked"
        case .alarmCancelled: return "alarm.cancelled"
        case .alarmAcknowledged: return "alarm.acknowledged"
        }
    }

    public var json: JSONValue {
        let fields: [(String, JSONValue)]
        switch self {
        case .position(let from, let position): fields = [("from", .string(from))] + position.jsonMembers()
        case .friendRequest(let from): fields = [("from", from.json)]
        case .friendAdded(let user): fields = [("user", user.json)]
        case .friendDeclined(let username), .friendRemoved(let username): fields = [("username", .string(username))]
        case .presence(let username, let online, let lastSeen):
            fields = [("username", .string(username)), ("online", .bool(online)), ("lastSeen", lastSeen.map(JSONValue.int) ?? .null)]
        case .sessionInvite(let session): fields = [("session", session.json)]
        case .sessionAccepted(let id, let by), .sessionDeclined(let id, let by), .sessionLeft(let id, let by):
            fields = [("sessionId", .string(id)), ("by", .string(by))]
        case .sessionEnded(let id, let reason): fields = [("sessionId", .string(id)), ("reason", .string(reason))]
        case .sessionLost(let id, let lastPosition, let since):
            fields = [("sessionId", .string(id)), ("lastPosition", lastPosition?.json ?? .null), ("since", since.map(JSONValue.int) ?? .null)]
        case .sessionResumed(let id): fields = [("sessionId", .string(id))]
        case .alarm(let alarm, let count):
            fields = [("alarm", alarm.json)] + (count.map { [("repeat", JSONValue.int(Int64($0)))] } ?? [])
        case .alarmAcked(let id, let by), .alarmAcknowledged(let id, let by): fields = [("alarmId", .string(id)), ("by", .string(by))]
        case .alarmCancelled(let id, let reason): fields = [("alarmId", .string(id)), ("reason", .string(reason))]
        }
        return Message.event(type, fields)
    }

    /// Reads an event; nil for a type this version does not know or one missing a required member.
    public init?(json: JSONValue) {
        let sessionId = json.string("sessionId")
        let by = json.string("by")
        switch json.string("type") {
        case "pos":
            guard let from = json.string("from"), let position = Position(relayed: json) else { return nil }
            self = .position(from: from, position)
        case "friend.request":
            guard let from = UserInfo(json: json.object("from")) else { return nil }
            self = .friendRequest(from: from)
        case "friend.added":
            guard let user = UserInfo(json: json.object("user")) else { return nil }
            self = .friendAdded(user)
        case "friend.declined":
            guard let name = json.string("username") else { return nil }
            self = .friendDeclined(username: name)
        case "friend.removed":
            guard let name = json.string("username") else { return nil }
            self = .friendRemoved(username: name)
        case "presence":
            guard let name = json.string("username") else { return nil }
            self = .presence(username: name, online: json.bool("online") ?? false, lastSeen: json.int64("lastSeen"))
        case "session.invite":
            guard let session = SessionInfo(json: json.object("session")) else { return nil }
            self = .sessionInvite(session)
        case "session.accepted":
            guard let sessionId, let by else { return nil }
            self = .sessionAccepted(sessionId: sessionId, by: by)
        case "session.declined":
            guard let sessionId, let by else { return nil }
            self = .sessionDeclined(sessionId: sessionId, by: by)
        case "session.left":
            guard let sessionId, let by else { return nil }
            self = .sessionLeft(sessionId: sessionId, by: by)
        case "session.ended":
            guard let sessionId else { return nil }
            self = .sessionEnded(sessionId: sessionId, reason: json.string("reason") ?? "ended")
        case "session.lost":
            guard let sessionId else { return nil }
            self = .sessionLost(sessionId: sessionId, lastPosition: Position(relayed: json.object("lastPosition")),
                                since: json.int64("since"))
        case "session.resumed":
            guard let sessionId else { return nil }
            self = .sessionResumed(sessionId: sessionId)
        case "alarm":
            guard let alarm = AlarmInfo(json: json.object("alarm")) else { return nil }
            self = .alarm(alarm, repeat: json.int64("repeat").map { Int($0) })
        case "alarm.acked":
            guard let id = json.string("alarmId"), let by else { return nil }
            self = .alarmAcked(alarmId: id, by: by)
        case "alarm.acknowledged":
            guard let id = json.string("alarmId"), let by else { return nil }
            self = .alarmAcknowledged(alarmId: id, by: by)
        case "alarm.cancelled":
            guard let id = json.string("alarmId") else { return nil }
            self = .alarmCancelled(alarmId: id, reason: json.string("reason") ?? "cancelled")
        default:
            return nil
        }
    }
}
