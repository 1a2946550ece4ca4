import HomewardProtocol

/// The friends' map (issue 15): sharing with chosen friends at all times, pausing it, meeting points and
/// messages. Events (`friend.sharing`, `meet`, `msg`, receipts, `location.resumed`) arrive on `events()`.
extension RelayClient {
    /// Replaces the friends who receive our positions at all times (an empty list stops); nil reads it.
    @discardableResult
    public func shareAlways(with usernames: [String]?) async throws(RelayClientError) -> LocationSharingReply {
        try await request(.shareAlways(with: usernames), as: LocationSharingReply.self)
    }

    /// A friend's last position and its age, if they share with us at all times (else `forbidden`).
    public func friendLocation(_ username: String) async throws(RelayClientError) -> FriendLocationReply {
        try await request(.friendLocation(username: username), as: FriendLocationReply.self)
    }

    /// The path of a walk we receive (feature `trail`): observers, alarm recipients, friends sharing with us.
    public func friendTrail(_ username: String) async throws(RelayClientError) -> FriendTrailReply {
        try await request(.friendTrail(username: username), as: FriendTrailReply.self)
    }

    /// Hides our positions from everyone (`from` nil) or one friend, until `until` (Unix ms) or `resume`.
    /// Alarm recipients still get them while an alarm is active (`alarmRecipients` in the reply).
    @discardableResult
    public func pauseLocation(from: String? = nil, until: Int64? = nil) async throws(RelayClientError) -> LocationSharingReply {
        try await request(.locationPause(from: from, until: until), as: LocationSharingReply.self)
    }

    @discardableResult
    public func resumeLocation(from: String? = nil) async throws(RelayClientError) -> LocationSharingReply {
        try await request(.locationResume(from: from), as: LocationSharingReply.self)
    }

    public func proposeMeeting(_ proposal: MeetingProposal) async throws(RelayClientError) -> MeetingInfo {
        try await request(.meetPropose(proposal), as: MeetingReply.self).meeting
    }

    /// Accepts (`true`) or declines a meeting point we are invited to.
    @discardableResult
    public func answerMeeting(_ meetingId: String, accept: Bool) async throws(RelayClientError) -> MeetingInfo {
        let request: Request = accept ? .meetAccept(meetingId: meetingId) : .meetDecline(meetingId: meetingId)
        return try await self.request(request, as: MeetingReply.self).meeting
    }

    public func cancelMeeting(_ meetingId: String) async throws(RelayClientError) {
        try await request(.meetCancel(meetingId: meetingId))
    }

    public func meetings() async throws(RelayClientError) -> [MeetingInfo] {
        try await request(.meetList, as: MeetingListReply.self).meetings
    }

    /// Sends a message (1 to 1000 characters, no control characters) to a friend, delivered at once or
    /// when they are next online.
    public func sendMessage(to username: String, text: String) async throws(RelayClientError) -> MessageInfo {
        try await request(.msgSend(to: username, text: text), as: MessageReply.self).message
    }

    /// Marks a message sent to us as read: its sender gets `msg.read`, and the relay forgets it.
    public func markRead(_ messageId: String) async throws(RelayClientError) {
        try await request(.msgRead(messageId: messageId))
    }
}
