import HomewardProtocol

/// What the CLI remembers between runs under one profile name: where the relay is, how to
/// trust it, who we are and the token that signs us in.
struct Profile: Sendable, Equatable {
    var relay: String?
    /// The CA file given at `register`/`login`, so later commands need not repeat `--ca`.
    /// `--insecure` is deliberately never remembered.
    var ca: String?
    var username: String?
    var token: String?
    /// The last alarm this profile raised, so `homeward cancel` needs no id.
    var lastAlarmId: String?

    init(relay: String? = nil, ca: String? = nil, username: String? = nil, token: String? = nil, lastAlarmId: String? = nil) {
        self.relay = relay
        self.ca = ca
        self.username = username
        self.token = token
        self.lastAlarmId = lastAlarmId
    }

    init(json: JSONValue) {
        relay = json["relay"]?.stringValue
        ca = json["ca"]?.stringValue
        username = json["username"]?.stringValue
        token = json["token"]?.stringValue
        lastAlarmId = json["lastAlarmId"]?.stringValue
    }

    var json: JSONValue {
        var members: [(String, JSONValue)] = []
        if let relay { members.append(("relay", .string(relay))) }
        if let ca { members.append(("ca", .string(ca))) }
        if let username { members.append(("username", .string(username))) }
        if let token { members.append(("token", .string(token))) }
        if let lastAlarmId { members.append(("lastAlarmId", .string(lastAlarmId))) }
        return .object(members)
    }
}
