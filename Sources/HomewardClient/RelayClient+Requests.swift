import HomewardProtocol

/// The contract's requests as typed calls: each sends a `Request` of the wire model and decodes its
/// reply with the wire model's `ReplyBody`, the same types the relay encodes them with.
extension RelayClient {
    // MARK: Accounts

    public func register(username: String, password: String, name: String? = nil) async throws(RelayClientError) -> SignIn {
        try Self.signIn(await request(.register(username: username, password: password, name: name), as: SignInReply.self))
    }

    public func login(username: String, password: String) async throws(RelayClientError) -> SignIn {
        try Self.signIn(await request(.login(username: username, password: password), as: SignInReply.self))
    }

    /// Signs in with a token from an earlier `register` or `login`.
    @discardableResult
    public func hello(token: String) async throws(RelayClientError) -> User {
        let reply = try await request(.hello(token: token), as: SignInReply.self)
        useToken(token)
        return reply.user
    }

    /// Revokes the token (with `all`, every token of the account); the connection stays open, signed out.
    public func logout(all: Bool = false) async throws(RelayClientError) {
        try await request(all ? .logoutAll : .logout)
    }

    /// The account's signed-in devices (tokens), oldest first.
    public func deviceSessions() async throws(RelayClientError) -> [DeviceSession] {
        try await request(.authSessions, as: DeviceSessionsReply.self).sessions
    }

    /// Revokes one of the account's tokens by the id `deviceSessions()` lists.
    public func revokeDeviceSession(_ id: String) async throws(RelayClientError) {
        try await request(.authRevoke(tokenId: id))
    }

    /// A round trip. Requests on a connection are served in order, so when this returns every
    /// position sent before it has been handled by the relay.
    public func ping() async throws(RelayClientError) {
        try await request(.ping)
    }

    private static func signIn(_ reply: SignInReply) throws(RelayClientError) -> SignIn {
        guard let token = reply.token else { throw .unexpectedReply("sign-in reply without a token") }
        return SignIn(user: reply.user, token: token)
    }

    // MARK: Friends

    public func requestFriend(_ username: String) async throws(RelayClientError) -> FriendRequestOutcome {
        let reply = try await request(.friendRequest(username: username), as: FriendshipReply.self)
        return reply.status == .friends ? .friends : .requested
    }

    @discardableResult
    public func acceptFriend(_ username: String) async throws(RelayClientError) -> User {
        let reply = try await request(.friendAccept(username: username), as: FriendshipReply.self)
        return reply.user ?? User(username: username, name: username)
    }

    public func declineFriend(_ username: String) async throws(RelayClientError) {
        try await request(.friendDecline(username: username))
    }

    /// Ends a friendship, or withdraws our pending request.
    public func removeFriend(_ username: String) async throws(RelayClientError) {
        try await request(.friendRemove(username: username))
    }

    public func friendList() async throws(RelayClientError) -> FriendList {
        try await request(.friendList, as: FriendListReply.self)
    }

    /// Users whose name starts with `prefix` (at most 20).
    public func searchUsers(_ prefix: String) async throws(RelayClientError) -> [User] {
        try await request(.userSearch(query: prefix), as: UserSearchReply.self).users
    }

    /// Blocks `username`: ends a friendship with them, and their friend requests no longer reach us.
    public func blockUser(_ username: String) async throws(RelayClientError) {
        try await request(.userBlock(username: username))
    }

    public func unblockUser(_ username: String) async throws(RelayClientError) {
        try await request(.userUnblock(username: username))
    }

    public func blockedUsers() async throws(RelayClientError) -> [User] {
        // The same shape as a search's reply: `users`.
        try await request(.userBlocks, as: UserSearchReply.self).users
    }

    // MARK: Sessions

    /// Starts our follow-me session; `options.invite` nil invites all friends.
    public func startSession(_ options: SessionOptions = SessionOptions()) async throws(RelayClientError) -> FollowMeSession {
        try await request(.sessionStart(options), as: SessionReply.self).session
    }

    public func inviteToSession(_ sessionId: String, invite: [String]) async throws(RelayClientError) -> FollowMeSession {
        try await request(.sessionInvite(sessionId: sessionId, invite: invite), as: SessionReply.self).session
    }

    /// Accepts an invitation; returns the session and the owner's last position, if any.
    public func acceptSession(_ sessionId: String) async throws(RelayClientError) -> (session: FollowMeSession, lastPosition: Position?) {
        let reply = try await request(.sessionAccept(sessionId: sessionId), as: SessionAcceptReply.self)
        return (reply.session, reply.position)
    }

    public func declineSession(_ sessionId: String) async throws(RelayClientError) {
        try await request(.sessionDecline(sessionId: sessionId))
    }

    public func leaveSession(_ sessionId: String) async throws(RelayClientError) {
        try await request(.sessionLeave(sessionId: sessionId))
    }

    public func endSession(_ sessionId: String) async throws(RelayClientError) {
        try await request(.sessionEnd(sessionId: sessionId))
    }

    public func sessionList() async throws(RelayClientError) -> SessionList {
        try await request(.sessionList, as: SessionListReply.self)
    }

    /// Checks in on our session (safety extension), optionally moving the deadline to `nextBy` (Unix ms).
    public func checkIn(_ sessionId: String, nextBy deadline: Int64? = nil) async throws(RelayClientError) {
        try await request(.sessionCheckin(sessionId: sessionId, checkInBy: deadline))
    }

    // MARK: Alarms

    public func raiseAlarm(_ alarm: AlarmRequest = AlarmRequest()) async throws(RelayClientError) -> RaisedAlarm {
        try await request(.alarmRaise(alarm), as: AlarmRaiseReply.self)
    }

    public func acknowledgeAlarm(_ alarmId: String) async throws(RelayClientError) {
        try await request(.alarmAck(alarmId: alarmId))
    }

    public func cancelAlarm(_ alarmId: String, reason: String? = nil) async throws(RelayClientError) {
        try await request(.alarmCancel(alarmId: alarmId, reason: reason))
    }

    /// Reads the alarm contacts, or replaces them when `usernames` is given.
    public func alarmContacts(set usernames: [String]? = nil) async throws(RelayClientError) -> [String] {
        try await request(.alarmContacts(usernames: usernames), as: AlarmContactsReply.self).usernames
    }

    // MARK: Push (protocol 1.1)

    /// Registers a Web Push subscription (as a browser's `PushSubscription.toJSON()` gives it); returns its id.
    public func subscribePush(endpoint: String, p256dh: String, auth: String) async throws(RelayClientError) -> String {
        try await request(.pushSubscribe(.init(endpoint: endpoint, p256dh: p256dh, auth: auth)), as: PushSubscribeReply.self)
            .subscriptionId
    }

    public func unsubscribePush(_ id: String) async throws(RelayClientError) {
        try await request(.pushUnsubscribe(subscriptionId: id))
    }

    /// The account's push subscriptions, oldest first (without their keys).
    public func pushSubscriptions() async throws(RelayClientError) -> [PushSubscriptionInfo] {
        try await request(.pushList, as: PushListReply.self).subscriptions
    }
}
