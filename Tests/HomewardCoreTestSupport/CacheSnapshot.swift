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

    /// `emptyContactsAsNone`: an empty list of alarm contacts, which the rules leave and the store keeps as no rows, counts
    /// as none (it means the same: alarms go to all friends).
    package init(_ state: RelayState, emptyContactsAsNone: Bool = false) {
        func entries<C: Collection>(_ index: [String: C]) -> [String: C] { index.filter { !$0.value.isEmpty } }
        users = state.users
        friends = entries(state.friends)
        incoming = entries(state.incoming)
        outgoing = entries(state.outgoing)
        blocked = entries(state.blocked)
        tokensByUser = entries(state.tokensByUser)
        // Kept exactly: an empty list here would make its owner count as one (`RelayState.owners`).
        contacts = emptyContactsAsNone ? state.contacts.filter { !$0.value.isEmpty } : state.contacts
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

extension CacheSnapshot {
    /// The fields that differ, each side written out with its dictionaries and sets in order (a failure's message).
    package func difference(from other: CacheSnapshot) -> String {
        let mine = Mirror(reflecting: self).children, theirs = Mirror(reflecting: other).children
        var parts: [String] = []
        for (label, (a, b)) in zip(mine.map(\.label), zip(mine.map(\.value), theirs.map(\.value))) {
            let (x, y) = (Self.canonical(a), Self.canonical(b))
            if x != y { parts.append("\(label ?? "?"): \(x.prefix(1200)) instead of \(y.prefix(1200))") }
        }
        return parts.joined(separator: "; ")
    }

    /// `value` written out the same whatever the order of its dictionaries and sets.
    private static func canonical(_ value: Any) -> String {
        let mirror = Mirror(reflecting: value)
        switch mirror.displayStyle {
        case .dictionary, .set: return "[" + mirror.children.map { canonical($0.value) }.sorted().joined(separator: ", ") + "]"
        case .collection: return "[" + mirror.children.map { canonical($0.value) }.joined(separator: ", ") + "]"
        case .tuple: return "(" + mirror.children.map { canonical($0.value) }.joined(separator: ": ") + ")"
        default: return String(describing: value)
        }
    }
}
