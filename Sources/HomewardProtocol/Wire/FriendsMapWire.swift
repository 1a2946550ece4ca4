/// The friends' map (issue 15) on the wire: meeting points, messages and pauses as the relay sends them,
/// and the replies of its requests. `json`/`fields` encode (the relay), `init?(json:)` decodes (clients).

/// A location pause: hidden from everyone (`from` nil) or from one friend, until `until` or until resumed.
public struct PauseInfo: Sendable, Equatable {
    public var from: String?
    public var until: Int64?

    public init(from: String? = nil, until: Int64? = nil) {
        self.from = from
        self.until = until
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        if let from { members.append(("from", .string(from))) }
        if let until { members.append(("until", .int(until))) }
        return .object(members)
    }

    public init?(json: JSONValue?) {
        guard let json, case .object = json else { return nil }
        self.init(from: json.string("from"), until: json.int64("until"))
    }
}

/// One invitee of a meeting point: their answer, when the relay queued the proposal for them and when it
/// reached one of their connections (absent while they have been offline since).
public struct MeetingInvitee: Sendable, Equatable {
    public enum Response: String, Sendable { case pending, accepted, declined }

    public var username: String
    public var response: Response
    public var queuedAt: Int64
    public var deliveredAt: Int64?

    public init(username: String, response: Response = .pending, queuedAt: Int64, deliveredAt: Int64? = nil) {
        self.username = username
        self.response = response
        self.queuedAt = queuedAt
        self.deliveredAt = deliveredAt
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [("username", .string(username)), ("response", .string(response.rawValue)),
                                              ("queuedAt", .int(queuedAt))]
        if let deliveredAt { members.append(("deliveredAt", .int(deliveredAt))) }
        return .object(members)
    }

    public init?(json: JSONValue) {
        guard let username = json.string("username"), let queuedAt = json.int64("queuedAt") else { return nil }
        self.init(username: username, response: json.string("response").flatMap(Response.init(rawValue:)) ?? .pending,
                  queuedAt: queuedAt, deliveredAt: json.int64("deliveredAt"))
    }
}

/// `{meetingId, from: user, name, lat, lon, time, createdAt, invited: [invitee]}`.
public struct MeetingInfo: Sendable, Equatable {
    public var id: String
    public var from: UserInfo
    public var name: String
    public var lat: Double
    public var lon: Double
    public var time: Int64
    public var createdAt: Int64
    public var invited: [MeetingInvitee]

    public init(id: String, from: UserInfo, name: String, lat: Double, lon: Double, time: Int64, createdAt: Int64,
                invited: [MeetingInvitee]) {
        self.id = id
        self.from = from
        self.name = name
        self.lat = lat
        self.lon = lon
        self.time = time
        self.createdAt = createdAt
        self.invited = invited
    }

    public var json: JSONValue {
        .object([("meetingId", .string(id)), ("from", from.json), ("name", .string(name)), ("lat", .number(lat)),
                 ("lon", .number(lon)), ("time", .int(time)), ("createdAt", .int(createdAt)),
                 ("invited", .array(invited.map(\.json)))])
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("meetingId"), let from = UserInfo(json: json.object("from")),
              let lat = json["lat"]?.numberValue, let lon = json["lon"]?.numberValue, let time = json.int64("time") else { return nil }
        self.init(id: id, from: from, name: json.string("name") ?? "", lat: lat, lon: lon, time: time,
                  createdAt: json.int64("createdAt") ?? 0, invited: json.array("invited").compactMap(MeetingInvitee.init(json:)))
    }
}

/// A message between friends: `{messageId, from, to, text, queuedAt, deliveredAt?}`.
public struct MessageInfo: Sendable, Equatable {
    public var id: String
    public var from: String
    public var to: String
    public var text: String
    public var queuedAt: Int64
    public var deliveredAt: Int64?

    public init(id: String, from: String, to: String, text: String, queuedAt: Int64, deliveredAt: Int64? = nil) {
        self.id = id
        self.from = from
        self.to = to
        self.text = text
        self.queuedAt = queuedAt
        self.deliveredAt = deliveredAt
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [("messageId", .string(id)), ("from", .string(from)), ("to", .string(to)),
                                              ("text", .string(text)), ("queuedAt", .int(queuedAt))]
        if let deliveredAt { members.append(("deliveredAt", .int(deliveredAt))) }
        return .object(members)
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("messageId"), let from = json.string("from"), let to = json.string("to"),
              let text = json.string("text"), let queuedAt = json.int64("queuedAt") else { return nil }
        self.init(id: id, from: from, to: to, text: text, queuedAt: queuedAt, deliveredAt: json.int64("deliveredAt"))
    }
}

/// `share.always` and `location.pause`/`location.resume`: who receives the caller's positions at all times,
/// the pauses in force, and (only while the caller has an active alarm) who still receives positions
/// through it whatever the pauses say.
public struct LocationSharingReply: ReplyBody, Equatable {
    public var with: [String]
    public var pauses: [PauseInfo]
    public var alarmRecipients: [String]?

    public init(with: [String], pauses: [PauseInfo], alarmRecipients: [String]? = nil) {
        self.with = with
        self.pauses = pauses
        self.alarmRecipients = alarmRecipients
    }

    public var fields: [(String, JSONValue)] {
        [("with", .strings(with)), ("pauses", .array(pauses.map(\.json)))]
            + (alarmRecipients.map { [("alarmRecipients", JSONValue.strings($0))] } ?? [])
    }

    public init?(json: JSONValue) {
        self.init(with: json.strings("with"), pauses: json.array("pauses").compactMap { PauseInfo(json: $0) },
                  alarmRecipients: json["alarmRecipients"] == nil ? nil : json.strings("alarmRecipients"))
    }
}

/// `friend.location`: the friend's last position (absent when they have sent none since the relay started)
/// and its age in milliseconds at the time of the reply.
public struct FriendLocationReply: ReplyBody, Equatable {
    public var username: String
    public var position: Position?
    public var age: Int64?

    public init(username: String, position: Position?, age: Int64?) {
        self.username = username
        self.position = position
        self.age = age
    }

    public var fields: [(String, JSONValue)] {
        [("username", .string(username)), ("position", position?.json ?? .null)] + (age.map { [("age", JSONValue.int($0))] } ?? [])
    }

    public init?(json: JSONValue) {
        guard let username = json.string("username") else { return nil }
        self.init(username: username, position: Position(relayed: json.object("position")), age: json.int64("age"))
    }
}

/// `meet.propose`, `meet.accept`, `meet.decline`: the meeting point as it stands.
public struct MeetingReply: ReplyBody, Equatable {
    public var meeting: MeetingInfo

    public init(meeting: MeetingInfo) { self.meeting = meeting }

    public var fields: [(String, JSONValue)] { [("meeting", meeting.json)] }

    public init?(json: JSONValue) {
        guard let meeting = MeetingInfo(json: json.object("meeting")) else { return nil }
        self.init(meeting: meeting)
    }
}

/// `meet.list`: the meeting points the caller proposed or is invited to, soonest first.
public struct MeetingListReply: ReplyBody, Equatable {
    public var meetings: [MeetingInfo]

    public init(meetings: [MeetingInfo]) { self.meetings = meetings }

    public var fields: [(String, JSONValue)] { [("meetings", .array(meetings.map(\.json)))] }

    public init?(json: JSONValue) {
        self.init(meetings: json.array("meetings").compactMap { MeetingInfo(json: $0) })
    }
}

/// `msg.send`: the message as queued (`deliveredAt` set when it reached the friend at once).
public struct MessageReply: ReplyBody, Equatable {
    public var message: MessageInfo

    public init(message: MessageInfo) { self.message = message }

    public var fields: [(String, JSONValue)] { [("message", message.json)] }

    public init?(json: JSONValue) {
        guard let message = MessageInfo(json: json.object("message")) else { return nil }
        self.init(message: message)
    }
}
