import HomewardProtocol

/// One durable change, applied by a `RelayStore` together with the others of the same operation in one transaction.
public enum StoreChange: Sendable, Equatable {
    case createUser(UserProfile, passwordHash: String, at: Int64)
    case createToken(hash: String, username: String, at: Int64)
    case revokeToken(hash: String)
    /// A sign-in with the token: its lifetime starts again from `at`.
    case useToken(hash: String, at: Int64)
    case addFriendRequest(from: String, to: String, at: Int64)
    case removeFriendRequest(from: String, to: String)
    case addFriendship(String, String, at: Int64)
    case removeFriendship(String, String)
    case addBlock(blocker: String, blocked: String, at: Int64)
    case removeBlock(blocker: String, blocked: String)
    case setAlarmContacts(owner: String, [String])
    /// Inserts or replaces the session with all its invitees.
    case saveSession(FollowSession)
    case endSession(id: String, reason: String, at: Int64)
    /// Inserts or replaces the alarm with all its recipients.
    case saveAlarm(Alarm)
    case endAlarm(id: String, reason: String, at: Int64)
    case lastSeen(username: String, at: Int64)
    /// Inserts the subscription; any other subscription of the same endpoint (another account's, or an
    /// older one) is removed with its waiting pushes, so an endpoint belongs to one account.
    case savePushSubscription(PushSubscription)
    /// Removes the subscription and every outbox entry still waiting for it.
    case deletePushSubscription(id: String)
    case enqueueOutbox(OutboxEntry)
    /// The alarm was acknowledged or cancelled: its Web Pushes still waiting are dropped (webhook calls stay).
    case cancelAlarmPushes(alarmId: String)
    /// A new share link (its token's hash only).
    case saveShare(ShareLink)
    /// A share link ended: revoked, expired, or its session ended.
    case removeShare(id: String)
    /// Friends' map: the friends who receive `owner`'s positions at all times (replaces the set; empty clears it).
    case setStandingShare(owner: String, [String])
    /// Inserts or replaces the owner's pause from `pause.from` (nil: from everyone).
    case savePause(LocationPause)
    case removePause(owner: String, from: String?)
    /// Inserts or replaces the meeting point with all its invitees.
    case saveMeeting(MeetingPoint)
    case removeMeeting(id: String)
    /// Inserts or replaces an unread message.
    case saveMessage(MessageInfo)
    /// The message was read; it is not kept.
    case removeMessage(id: String)
}
