/// A request a client sends, parsed and validated.
public enum Request: Sendable, Equatable {
    case register(username: String, password: String, name: String?)
    case login(username: String, password: String)
    case hello(token: String)
    case logout
    /// `logout` with `all: true`: every token of the user.
    case logoutAll
    case authSessions
    case authRevoke(tokenId: String)

    case friendRequest(username: String)
    case friendAccept(username: String)
    case friendDecline(username: String)
    case friendRemove(username: String)
    case friendList
    case userSearch(query: String)
    case userBlock(username: String)
    case userUnblock(username: String)
    case userBlocks

    case sessionStart(SessionOptions)
    case sessionCheckin(sessionId: String, checkInBy: Int64?)
    case sessionInvite(sessionId: String, invite: [String])
    case sessionAccept(sessionId: String)
    case sessionDecline(sessionId: String)
    case sessionLeave(sessionId: String)
    case sessionEnd(sessionId: String)
    case sessionList

    case position(Position)

    case alarmRaise(AlarmRaise)
    case alarmAck(alarmId: String)
    case alarmCancel(alarmId: String, reason: String?)
    case alarmContacts(usernames: [String]?)

    case pushSubscribe(PushSubscribe)
    case pushUnsubscribe(subscriptionId: String)
    case pushList

    case ping

    // Share links (protocol 1.1): watching one session without an account.
    case shareCreate(sessionId: String, ttl: Int64?)
    case shareList
    case shareRevoke(shareId: String)
    /// A viewer's first message: the link's token in place of a sign-in.
    case watch(token: String)

    // Friends' map (issue 15): standing share, pause, meeting points, messages.
    /// With `with`: the friends who receive the caller's positions at all times (replaces the set); without: read it.
    case shareAlways(with: [String]?)
    case friendLocation(username: String)
    /// Hide from everyone (`from` nil) or from one friend, until `until` (ms) or until resumed.
    case locationPause(from: String?, until: Int64?)
    case locationResume(from: String?)
    case meetPropose(MeetingProposal)
    case meetAccept(meetingId: String)
    case meetDecline(meetingId: String)
    case meetCancel(meetingId: String)
    case meetList
    case msgSend(to: String, text: String)
    case msgRead(messageId: String)
    /// Feature `trail`: the path of `username`'s active walk (`FriendTrailReply`).
    case friendTrail(username: String)

    public struct AlarmRaise: Sendable, Equatable {
        public var text: String?
        public var lat: Double?
        public var lon: Double?
        public var acc: Double?
        public var to: [String]?

        public init(text: String? = nil, lat: Double? = nil, lon: Double? = nil, acc: Double? = nil, to: [String]? = nil) {
            self.text = text
            self.lat = lat
            self.lon = lon
            self.acc = acc
            self.to = to
        }
    }

    /// `push.subscribe`: a browser's `PushSubscription.toJSON()` with `kind: "webpush"`. Only shapes
    /// are checked here; the relay checks the endpoint's address and the keys' bytes.
    public struct PushSubscribe: Sendable, Equatable {
        public var endpoint: String
        public var p256dh: String
        public var auth: String

        public init(endpoint: String, p256dh: String, auth: String) {
            self.endpoint = endpoint
            self.p256dh = p256dh
            self.auth = auth
        }

        public static let endpointLimit = 2048

        init(fields: Fields) throws(ProtocolError) {
            let kind = try fields.requiredString("kind", maxLength: 32)
            guard kind == "webpush" else { throw .badRequest("kind must be \"webpush\"") }
            endpoint = try fields.requiredString("endpoint", maxLength: Self.endpointLimit)
            guard case .object? = fields.object["keys"] else { throw .badRequest("keys must be an object with p256dh and auth") }
            let keys = Fields(fields.object["keys"] ?? .null)
            p256dh = try keys.requiredString("p256dh", maxLength: 128)
            auth = try keys.requiredString("auth", maxLength: 64)
        }
    }

    /// Whether the request may be sent before authentication.
    public var isAuthentication: Bool {
        switch self {
        case .register, .login, .hello, .ping, .watch: return true
        default: return false
        }
    }

    public static let noteLimit = 280
    public static let textLimit = 500

    init(type: String, fields: Fields, now: Int64) throws(ProtocolError) {
        switch type {
        case "register":
            let username = try fields.username("username")
            let password = try fields.requiredString("password", maxLength: 256)
            try Username.validatePassword(password)
            let name = try fields.string("name", maxLength: 64).map { (n) throws(ProtocolError) in try Username.validateDisplayName(n) }
            self = .register(username: username, password: password, name: name)
        case "login":
            // Malformed credentials are simply wrong credentials: same answer, and the same work, as a
            // wrong password. The name is validated like every other username field, though: one that
            // could never have been registered becomes a name no account has.
            self = .login(username: Username.loginName(try fields.requiredString("username", maxLength: 64)),
                          password: try fields.requiredString("password", maxLength: 256))
        case "hello": self = .hello(token: try fields.requiredString("token", maxLength: 256))
        case "logout": self = try fields.bool("all") == true ? .logoutAll : .logout
        case "auth.sessions": self = .authSessions
        case "auth.revoke": self = .authRevoke(tokenId: try fields.identifier("tokenId"))
        case "friend.request": self = .friendRequest(username: try fields.username("username"))
        case "friend.accept": self = .friendAccept(username: try fields.username("username"))
        case "friend.decline": self = .friendDecline(username: try fields.username("username"))
        case "friend.remove": self = .friendRemove(username: try fields.username("username"))
        case "friend.list": self = .friendList
        case "user.search":
            let query = try fields.requiredString("query", maxLength: 32).lowercased()
            self = .userSearch(query: query)
        case "user.block": self = .userBlock(username: try fields.username("username"))
        case "user.unblock": self = .userUnblock(username: try fields.username("username"))
        case "user.blocks": self = .userBlocks
        case "session.start":
            var destination: Destination?
            if let value = fields.object["destination"], value != .null { destination = try Destination(from: value) }
            self = .sessionStart(SessionOptions(
                invite: try fields.usernames("invite"),
                note: try fields.string("note", maxLength: Self.noteLimit),
                checkInBy: try SessionOptions.checkInDeadline(fields, now: now),
                destination: destination,
                ttl: try fields.integer("ttl", in: 1...(SessionOptions.maxHorizonMillis / 1000))))
        case "session.checkin":
            self = .sessionCheckin(sessionId: try fields.identifier("sessionId"),
                                   checkInBy: try SessionOptions.checkInDeadline(fields, now: now))
        case "session.invite":
            guard let invite = try fields.usernames("invite") else { throw .badRequest("invite is required") }
            self = .sessionInvite(sessionId: try fields.identifier("sessionId"), invite: invite)
        case "session.accept": self = .sessionAccept(sessionId: try fields.identifier("sessionId"))
        case "session.decline": self = .sessionDecline(sessionId: try fields.identifier("sessionId"))
        case "session.leave": self = .sessionLeave(sessionId: try fields.identifier("sessionId"))
        case "session.end": self = .sessionEnd(sessionId: try fields.identifier("sessionId"))
        case "session.list": self = .sessionList
        case "pos": self = .position(try Position(from: fields.object, now: now))
        case "alarm.raise":
            let lat = try fields.number("lat", in: -90...90)
            let lon = try fields.number("lon", in: -180...180)
            guard (lat == nil) == (lon == nil) else { throw .badRequest("lat and lon go together") }
            self = .alarmRaise(AlarmRaise(
                text: try fields.string("text", maxLength: Self.textLimit),
                lat: lat, lon: lon,
                acc: try fields.number("acc", in: 0...Double.greatestFiniteMagnitude),
                to: try fields.usernames("to")))
        case "alarm.ack": self = .alarmAck(alarmId: try fields.identifier("alarmId"))
        case "alarm.cancel":
            self = .alarmCancel(alarmId: try fields.identifier("alarmId"),
                                reason: try fields.string("reason", maxLength: Self.noteLimit))
        case "alarm.contacts": self = .alarmContacts(usernames: try fields.usernames("usernames"))
        case "push.subscribe": self = .pushSubscribe(try PushSubscribe(fields: fields))
        case "push.unsubscribe": self = .pushUnsubscribe(subscriptionId: try fields.identifier("subscriptionId"))
        case "push.list": self = .pushList
        case "ping": self = .ping
        case "share.create":
            // Any whole number is read here; the relay checks it against its limits and the session's end.
            self = .shareCreate(sessionId: try fields.identifier("sessionId"), ttl: try fields.integer("ttl", in: Int64.min...Int64.max))
        case "share.list": self = .shareList
        case "share.revoke": self = .shareRevoke(shareId: try fields.identifier("shareId"))
        case "watch": self = .watch(token: try fields.requiredString("token", maxLength: 256))
        default:
            guard let request = try Request.friendsMap(type: type, fields: fields, now: now) else {
                throw ProtocolError(.unsupported, "unknown type \(type)")
            }
            self = request
        }
    }
}

/// A request as it arrived: its `id` (if any) and what it asks for, or why it cannot be served.
public struct IncomingRequest: Sendable {
    public let id: RequestID?
    public let type: String
    public let result: Result<Request, ProtocolError>

    /// Parses one text frame's payload (already valid UTF-8).
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes, now: Int64) -> IncomingRequest {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            return IncomingRequest(id: nil, type: "", result: .failure(.badRequest("not JSON: \(error)")))
        }
        return parse(value, now: now)
    }

    public static func parse(_ value: JSONValue, now: Int64) -> IncomingRequest {
        guard case .object = value else {
            return IncomingRequest(id: nil, type: "", result: .failure(.badRequest("a message must be a JSON object")))
        }
        let id: RequestID?
        switch RequestID.parse(value["id"]) {
        case .success(let parsed): id = parsed
        case .failure(let error): return IncomingRequest(id: nil, type: "", result: .failure(error))
        }
        guard case .string(let type)? = value["type"] else {
            return IncomingRequest(id: id, type: "", result: .failure(.badRequest("type must be a string")))
        }
        do {
            return IncomingRequest(id: id, type: type, result: .success(try Request(type: type, fields: Fields(value), now: now)))
        } catch {
            return IncomingRequest(id: id, type: type, result: .failure(error))
        }
    }
}
