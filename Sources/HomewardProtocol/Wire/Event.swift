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
    // Friends' map (issue 15).
    /// A friend started (`sharing: true`) or stopped sharing their location with you at all times.
    case friendSharing(username: String, sharing: Bool)
    /// A pause of yours ended by itself at its `until` (`from` nil: the pause from everyone).
    case locationResumed(from: String?)
    /// A meeting point you are invited to (also when it changes); `queuedAt`/`deliveredAt` are yours.
    case meet(MeetingInfo)
    case meetResponse(meetingId: String, by: String, response: String)
    case meetCancelled(meetingId: String)
    /// To the proposer: the meeting point reached an invitee who was offline.
    case meetDelivered(meetingId: String, to: String, deliveredAt: Int64)
    case message(MessageInfo)
    /// To the sender: the message reached the friend (who was offline when it was sent).
    case messageDelivered(messageId: String, to: String, deliveredAt: Int64)
    case messageRead(messageId: String, by: String, readAt: Int64)

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
        case .friendSharing: return "friend.sharing"
        case .locationResumed: return "location.resumed"
        case .meet: return "meet"
        case .meetResponse: return "meet.response"
        case .meetCancelled: return "meet.cancelled"
        case .meetDelivered: return "meet.delivered"
        case .message: return "msg"
        case .messageDelivered: return "msg.delivered"
        case .messageRead: return "msg.read"
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
        case .friendSharing(let username, let sharing): fields = [("username", .string(username)), ("sharing", .bool(sharing))]
        case .locationResumed(let from): fields = from.map { [("from", JSONValue.string($0))] } ?? []
        case .meet(let meeting): fields = [("meeting", meeting.json)]
        case .meetResponse(let id, let by, let response):
            fields = [("meetingId", .string(id)), ("by", .string(by)), ("response", .string(response))]
        case .meetCancelled(let id): fields = [("meetingId", .string(id))]
        case .meetDelivered(let id, let to, let at): fields = [("meetingId", .string(id)), ("to", .string(to)), ("deliveredAt", .int(at))]
        case .message(let message): fields = [("message", message.json)]
        case .messageDelivered(let id, let to, let at):
            fields = [("messageId", .string(id)), ("to", .string(to)), ("deliveredAt", .int(at))]
        case .messageRead(let id, let by, let at): fields = [("messageId", .string(id)), ("by", .string(by)), ("readAt", .int(at))]
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
            guard let event = Event(friendsMap: json) else { return nil }
            self = event
        }
    }
}

extension Event {
    /// Reads a friends' map event (issue 15); nil for any other type or a missing required member.
    init?(friendsMap json: JSONValue) {
        let meetingId = json.string("meetingId")
        let messageId = json.string("messageId")
        switch json.string("type") {
        case "friend.sharing":
            guard let username = json.string("username"), let sharing = json.bool("sharing") else { return nil }
            self = .friendSharing(username: username, sharing: sharing)
        case "location.resumed": self = .locationResumed(from: json.string("from"))
        case "meet":
            guard let meeting = MeetingInfo(json: json.object("meeting")) else { return nil }
            self = .meet(meeting)
        case "meet.response":
            guard let meetingId, let by = json.string("by"), let response = json.string("response") else { return nil }
            self = .meetResponse(meetingId: meetingId, by: by, response: response)
        case "meet.cancelled":
            guard let meetingId else { return nil }
            self = .meetCancelled(meetingId: meetingId)
        case "meet.delivered":
            guard let meetingId, let to = json.string("to"), let at = json.int64("deliveredAt") else { return nil }
            self = .meetDelivered(meetingId: meetingId, to: to, deliveredAt: at)
        case "msg":
            guard let message = MessageInfo(json: json.object("message")) else { return nil }
            self = .message(message)
        case "msg.delivered":
            guard let messageId, let to = json.string("to"), let at = json.int64("deliveredAt") else { return nil }
            self = .messageDelivered(messageId: messageId, to: to, deliveredAt: at)
        case "msg.read":
            guard let messageId, let by = json.string("by"), let at = json.int64("readAt") else { return nil }
            self = .messageRead(messageId: messageId, by: by, readAt: at)
        default:
            return nil
        }
    }
}
