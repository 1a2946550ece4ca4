/// The one encoder of requests (what clients send); the one decoder is `Request.init(type:fields:now:)`.
extension Request {
    public var type: String {
        switch self {
        case .register: return "register"
        case .login: return "login"
        case .hello: return "hello"
        case .logout, .logoutAll: return "logout"
        case .authSessions: return "auth.sessions"
        case .authRevoke: return "auth.revoke"
        case .userBlock: return "user.block"
        case .userUnblock: return "user.unblock"
        case .userBlocks: return "user.blocks"
        case .friendRequest: return "friend.request"
        case .friendAccept: return "friend.accept"
        case .friendDecline: return "friend.decline"
        case .friendRemove: return "friend.remove"
        case .friendList: return "friend.list"
        case .userSearch: return "user.search"
        case .sessionStart: return "session.start"
        case .sessionCheckin: return "session.checkin"
        case .sessionInvite: return "session.invite"
        case .sessionAccept: return "session.accept"
        case .sessionDecline: return "session.decline"
        case .sessionLeave: return "session.leave"
        case .sessionEnd: return "session.end"
        case .sessionList: return "session.list"
        case .position: return "pos"
        case .alarmRaise: return "alarm.raise"
        case .alarmAck: return "alarm.ack"
        case .alarmCancel: return "alarm.cancel"
        case .alarmContacts: return "alarm.contacts"
        case .pushSubscribe: return "push.subscribe"
        case .pushUnsubscribe: return "push.unsubscribe"
        case .pushList: return "push.list"
        case .ping: return "ping"
        case .shareCreate: return "share.create"
        case .shareList: return "share.list"
        case .shareRevoke: return "share.revoke"
        case .watch: return "watch"
        case .shareAlways: return "share.always"
        case .friendLocation: return "friend.location"
        case .locationPause: return "location.pause"
        case .locationResume: return "location.resume"
        case .meetPropose: return "meet.propose"
        case .meetAccept: return "meet.accept"
        case .meetDecline: return "meet.decline"
        case .meetCancel: return "meet.cancel"
        case .meetList: return "meet.list"
        case .msgSend: return "msg.send"
        case .msgRead: return "msg.read"
        case .friendTrail: return "friend.trail"
        }
    }

    /// The request's members after `type` (and `id`); optional ones only when set.
    public var fields: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        func add(_ key: String, _ value: JSONValue?) {
            if let value { fields.append((key, value)) }
        }
        switch self {
        case .register(let username, let password, let name):
            add("username", .string(username))
            add("password", .string(password))
            add("name", name.map(JSONValue.string))
        case .login(let username, let password):
            add("username", .string(username))
            add("password", .string(password))
        case .hello(let token): add("token", .string(token))
        case .logout, .friendList, .sessionList, .ping, .authSessions, .userBlocks, .shareList, .pushList, .meetList: break
        case .logoutAll: add("all", .bool(true))
        case .authRevoke(let id): add("tokenId", .string(id))
        case .friendRequest(let username), .friendAccept(let username), .friendDecline(let username),
             .friendRemove(let username), .userBlock(let username), .userUnblock(let username):
            add("username", .string(username))
        case .userSearch(let query): add("query", .string(query))
        case .sessionStart(let options):
            add("invite", options.invite.map(JSONValue.strings))
            add("note", options.note.map(JSONValue.string))
            add("checkInBy", options.checkInBy.map(JSONValue.int))
            add("destination", options.destination?.json)
            add("ttl", options.ttl.map(JSONValue.int))
        case .sessionCheckin(let id, let checkInBy):
            add("sessionId", .string(id))
            add("checkInBy", checkInBy.map(JSONValue.int))
        case .sessionInvite(let id, let invite):
            add("sessionId", .string(id))
            add("invite", .strings(invite))
        case .sessionAccept(let id), .sessionDecline(let id), .sessionLeave(let id), .sessionEnd(let id):
            add("sessionId", .string(id))
        case .position(let position): fields = position.jsonMembers()
        case .alarmRaise(let raise):
            add("text", raise.text.map(JSONValue.string))
            add("lat", raise.lat.map(JSONValue.number))
            add("lon", raise.lon.map(JSONValue.number))
            add("acc", raise.acc.map(JSONValue.number))
            add("to", raise.to.map(JSONValue.strings))
        case .alarmAck(let id): add("alarmId", .string(id))
        case .alarmCancel(let id, let reason):
            add("alarmId", .string(id))
            add("reason", reason.map(JSONValue.string))
        case .alarmContacts(let usernames): add("usernames", usernames.map(JSONValue.strings))
        case .pushSubscribe(let subscription):
            add("kind", .string("webpush"))
            add("endpoint", .string(subscription.endpoint))
            add("keys", .object([("p256dh", .string(subscription.p256dh)), ("auth", .string(subscription.auth))]))
        case .pushUnsubscribe(let id): add("subscriptionId", .string(id))
        case .shareCreate(let id, let ttl):
            add("sessionId", .string(id))
            add("ttl", ttl.map(JSONValue.int))
        case .shareRevoke(let id): add("shareId", .string(id))
        case .watch(let token): add("token", .string(token))
        case .shareAlways(let with): add("with", with.map(JSONValue.strings))
        case .friendLocation(let username), .friendTrail(let username): add("username", .string(username))
        case .locationPause(let from, let until):
            add("from", from.map(JSONValue.string))
            add("until", until.map(JSONValue.int))
        case .locationResume(let from): add("from", from.map(JSONValue.string))
        case .meetPropose(let proposal):
            add("to", .strings(proposal.to))
            add("lat", .number(proposal.lat))
            add("lon", .number(proposal.lon))
            add("name", .string(proposal.name))
            add("time", .int(proposal.time))
        case .meetAccept(let id), .meetDecline(let id), .meetCancel(let id): add("meetingId", .string(id))
        case .msgSend(let to, let text):
            add("to", .string(to))
            add("text", .string(text))
        case .msgRead(let id): add("messageId", .string(id))
        }
        return fields
    }

    /// The whole request as sent: `{"type": ..., "id": ..., fields...}`.
    public func json(id: RequestID? = nil) -> JSONValue {
        var members: [(String, JSONValue)] = [("type", .string(type))]
        if let id { members.append(("id", id.json)) }
        return .object(members + fields)
    }
}
