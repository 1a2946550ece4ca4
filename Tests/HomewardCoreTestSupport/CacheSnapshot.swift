import HomewardCore
import HomewardProtocol

/// Everything a relay's cache holds that a reload rebuilds from the store: each durable structure and each
/// index derived from them. An empty index entry counts as none (a reload makes none; the rules may leave
/// one behind, and nothing reads the difference). Not compared: the change count (`NoticeSequencer`'s
/// business) and what is not stored at all (throttles, friend request notices).
package struct CacheSnapshot: Equatable {
    let users: [String: UserProfile]
    let friends, incoming, outgoing, blocked, tokensByUser: [String: Set<String>]
    let contacts, standing, pushByUser: [String: [String]]
    let tokens: [String: IssuedToken]
    let sessions: [String: FollowSession]
    let sessionByOwner: [String: String]
    let sessionsByInvitee, alarmsByOwner, alarmsByRecipient, sharesBySession, meetingsByUser, messagesByRecipient: [String: Set<String>]
    let alarms: [String: Alarm]
    let pushSubscriptions: [String: PushSubscription]
    let shares: [String: ShareLink]
    let sharesByHash: [String: String]
    let pauses: [String: [String: LocationPause]]
    let meetings: [String: MeetingPoint]
    let messages: [String: MessageInfo]
    let offlineOwners: [String: Int64]

    package init(_ state: RelayState) {
        func entries<C: Collection>(_ index: [String: C]) -> [String: C] { index.filter { !$0.value.isEmpty } }
        users = state.users
        friends = entries(state.friends)
        incoming = entries(state.incoming)
        outgoing = entries(state.outgoing)
        blocked = entries(state.blocked)
        tokensByUser = entries(state.tokensByUser)
        // Kept exactly: an empty list here would make its owner count as one (`RelayState.owners`).
        contacts = state.contacts
        standing = state.standing
        pushByUser = entries(state.pushByUser)
        tokens = state.tokens
        sessions = state.sessions
        sessionByOwner = state.sessionByOwner
        sessionsByInvitee = entries(state.sessionsByInvitee)
        alarmsByOwner = entries(state.alarmsByOwner)
        alarmsByRecipient = entries(state.alarmsByRecipient)
        sharesBySession = entries(state.sharesBySession)
        meetingsByUser = entries(state.meetingsByUser)
        messagesByRecipient = entries(state.messagesByRecipient)
        alarms = state.alarms
        pushSubscriptions = state.pushSubscriptions
        shares = state.shares
        sharesByHash = state.sharesByHash
        pauses = state.pauses
        meetings = state.meetings
        messages = state.messages
        offlineOwners = state.offlineOwners
    }
}
