import HomewardProtocol

/// The contract's requests as typed calls.
extension RelayClient {
    // MARK: Accounts

    public func register(username: String, password: String, name: String? = nil) async throws(RelayClientError) -> SignIn {
        var fields: [(String, JSONValue)] = [("username", .string(username)), ("password", .string(password))]
        if let name { fields.append(("name", .string(name))) }
        return try Self.signIn(from: await request("register", fields))
    }

    public func login(username: String, password: String) async throws(RelayClientError) -> SignIn {
        try Self.signIn(from: await request("login", [("username", .string(username)), ("password", .string(password))]))
    }

    /// Signs in with a token from an earlier `register` or `login`.
    @discardableResult
    public func hello(token: String) async throws(RelayClientError) -> User {
        let reply = try await request("hello", [("token", .string(token))])
        guard let user = User(json: reply.object("user")) else { throw .unexpectedReply("hello reply without a user") }
        useToken(token)
        return user
    }

    /// Revokes the token; the connection stays open, signed out.
    public func logout() async throws(RelayClientError) {
        try await request("logout")
    }

    /// A round trip. Requests on a connection are served in order, so when this returns every
    /// position sent before it has been handled by the relay.
    public func ping() async throws(RelayClientError) {
        try await request("ping")
    }

    private static func signIn(from reply: JSONValue) throws(RelayClientError) -> SignIn {
        guard let user = User(json: reply.object("user")), let token = reply.string("token") else {
            throw .unexpectedReply("sign-in reply without user and token")
        }
        return SignIn(user: user, token: token)
    }

    // MARK: Friends

    public func requestFriend(_ username: String) async throws(RelayClientError) -> FriendRequestOutcome {
        let reply = try await request("friend.request", [("username", .string(username))])
        return reply.string("status") == "friends" ? .friends : .requested
    }

    @discardableResult
    public func acceptFriend(_ username: String) async throws(RelayClientError) -> User {
        let reply = try await request("friend.accept", [("username", .string(username))])
        return User(json: reply.object("user")) ?? User(username: username, name: username)
    }

    public func declineFriend(_ username: String) async throws(RelayClientError) {
        try await request("friend.decline", [("username", .string(username))])
    }

    /// Ends a friendship, or withdraws our pending request.
    public func removeFriend(_ username: String) async throws(RelayClientError) {
        try await request("friend.remove", [("username", .string(username))])
    }

    public func friendList() async throws(RelayClientError) -> FriendList {
        FriendList(json: try await request("friend.list"))
    }

    /// Users whose name starts with `prefix` (at most 20).
    public func searchUsers(_ prefix: String) async throws(RelayClientError) -> [User] {
        try await request("user.search", [("query", .string(prefix))]).array("users").compactMap { User(json: $0) }
    }

    // MARK: Sessions

    /// Starts our follow-me session; `options.invite` nil invites all friends.
    public func startSession(_ options: SessionOptions = SessionOptions()) async throws(RelayClientError) -> FollowMeSession {
        try Self.session(from: await request("session.start", options.requestFields))
    }

    public func inviteToSession(_ sessionId: String, invite: [String]) async throws(RelayClientError) -> FollowMeSession {
        try Self.session(from: await request("session.invite", [("sessionId", .string(sessionId)), ("invite", .strings(invite))]))
    }

    /// Accepts an invitation; returns the session and the owner's last position, if any.
    public func acceptSession(_ sessionId: String) async throws(RelayClientError) -> (session: FollowMeSession, lastPosition: Position?) {
        let reply = try await request("session.accept", [("sessionId", .string(sessionId))])
        return (try Self.session(from: reply), reply.object("position").flatMap { Position(relayed: $0) })
    }

    public func declineSession(_ sessionId: String) async throws(RelayClientError) {
        try await request("session.decline", [("sessionId", .string(sessionId))])
    }

    public func leaveSession(_ sessionId: String) async throws(RelayClientError) {
        try await request("session.leave", [("sessionId", .string(sessionId))])
    }

    public func endSession(_ sessionId: String) async throws(RelayClientError) {
        try await request("session.end", [("sessionId", .string(sessionId))])
    }

    public func sessionList() async throws(RelayClientError) -> SessionList {
        SessionList(json: try await request("session.list"))
    }

    /// Checks in on our session (safety extension), optionally moving the deadline to `nextBy` (Unix ms).
    public func checkIn(_ sessionId: String, nextBy deadline: Int64? = nil) async throws(RelayClientError) {
        var fields: [(String, JSONValue)] = [("sessionId", .string(sessionId))]
        if let deadline { fields.append(("checkInBy", .int(deadline))) }
        try await request("session.checkin", fields)
    }

    private static func session(from reply: JSONValue) throws(RelayClientError) -> FollowMeSession {
        guard let session = FollowMeSession(json: reply.object("session")) else { throw .unexpectedReply("reply without a session") }
        return session
    }

    // MARK: Alarms

    public func raiseAlarm(_ alarm: AlarmRequest = AlarmRequest()) async throws(RelayClientError) -> RaisedAlarm {
        let reply = try await request("alarm.raise", alarm.fields)
        guard let raised = PanicAlarm(json: reply.object("alarm")) else { throw .unexpectedReply("alarm.raise reply without an alarm") }
        let recipients = reply.array("recipients").compactMap { json -> AlarmRecipient? in
            guard let name = json.string("username") else { return nil }
            return AlarmRecipient(username: name, online: json.bool("online") ?? false)
        }
        return RaisedAlarm(alarm: raised, recipients: recipients)
    }

    public func acknowledgeAlarm(_ alarmId: String) async throws(RelayClientError) {
        try await request("alarm.ack", [("alarmId", .string(alarmId))])
    }

    public func cancelAlarm(_ alarmId: String, reason: String? = nil) async throws(RelayClientError) {
        var fields: [(String, JSONValue)] = [("alarmId", .string(alarmId))]
        if let reason { fields.append(("reason", .string(reason))) }
        try await request("alarm.cancel", fields)
    }

    /// Reads the alarm contacts, or replaces them when `usernames` is given.
    public func alarmContacts(set usernames: [String]? = nil) async throws(RelayClientError) -> [String] {
        let fields: [(String, JSONValue)] = usernames.map { [("usernames", .strings($0))] } ?? []
        return try await request("alarm.contacts", fields).strings("usernames")
    }
}
