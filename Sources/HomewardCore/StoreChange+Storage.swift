/// What every `RelayStore` needs to store a change the same way: which strings of it are keys (compared
/// in SQL, so they must be stored exactly), the storage order of a friendship pair, and an alarm's
/// recipient rows.
/// Added for the PostgreSQL store (issue 13): SQLite and PostgreSQL share these rules, and no rule
/// of the relay depends on them.
extension StoreChange {
    /// Every string of the change that a store compares: usernames, ids and token hashes.
    public var keys: [String] {
        switch self {
        case let .createUser(profile, _, _): [profile.username]
        case let .createToken(hash, username, _): [hash, username]
        case let .revokeToken(hash), let .useToken(hash, _): [hash]
        case let .addFriendRequest(from, to, _), let .removeFriendRequest(from, to): [from, to]
        case let .addFriendship(a, b, _), let .removeFriendship(a, b): [a, b]
        case let .addBlock(blocker, blocked, _), let .removeBlock(blocker, blocked): [blocker, blocked]
        case let .setAlarmContacts(owner, contacts): [owner] + contacts
        case let .saveSession(session): [session.id, session.owner] + session.invitees
        case let .endSession(id, _, _), let .endAlarm(id, _, _): [id]
        case let .saveAlarm(alarm): [alarm.id, alarm.owner] + alarm.recipients
        case let .lastSeen(username, _): [username]
        case let .savePushSubscription(subscription): [subscription.id, subscription.username] + (subscription.tokenHash.map { [$0] } ?? [])
        case let .deletePushSubscription(id): [id]
        case let .enqueueOutbox(entry): [entry.id] + (entry.subscriptionId.map { [$0] } ?? []) + (entry.alarmId.map { [$0] } ?? [])
        case let .cancelAlarmPushes(alarmId): [alarmId]
        case let .saveShare(share): [share.id, share.sessionId, share.owner, share.tokenHash]
        case let .removeShare(id), let .removeMeeting(id), let .removeMessage(id): [id]
        case let .setStandingShare(owner, friends): [owner] + friends
        case let .savePause(pause): [pause.owner, pause.key]
        case let .removePause(owner, from): [owner, from ?? LocationPause.everyone]
        case let .saveMeeting(meeting): [meeting.id, meeting.owner] + meeting.invitees.map(\.username)
        case let .saveMessage(message): [message.id, message.from, message.to]
        }
    }

    /// The first key of the change that contains NUL. Neither SQLite (C strings) nor PostgreSQL
    /// (TEXT) can compare such a key whole, so a store refuses the change's whole batch.
    public var keyWithNUL: String? { keys.first { $0.utf8.contains(0) } }

    /// A friendship pair in storage order: smaller username first.
    public static func canonical(_ first: String, _ second: String) -> (String, String) {
        first < second ? (first, second) : (second, first)
    }

    /// `names` without repeats, first occurrence kept: a repeated name would break a primary key.
    public static func unique(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }
}

/// One stored recipient of an alarm (a row of `alarm_recipients`).
public struct StoredRecipient: Sendable, Equatable {
    public let username: String
    public let position: Int64
    public let deliveredAt: Int64?
    public let ackedAt: Int64?
    public let ackOrder: Int64?
}

extension Alarm {
    /// The recipient rows to store for this alarm: each recipient once, in order.
    ///
    /// `Alarm` keeps the order of acknowledgements but not their times, so a recipient keeps the time
    /// of the first save that saw it acknowledged: `ackTimes` (what is stored now), else `now`.
    public func storedRecipients(ackTimes: [String: Int64], now: Int64) -> [StoredRecipient] {
        let ackOrder = Dictionary(acked.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        return StoreChange.unique(recipients).enumerated().map { position, username in
            let order = ackOrder[username].map(Int64.init)
            return StoredRecipient(username: username, position: Int64(position), deliveredAt: deliveredAt[username],
                                   ackedAt: order.map { _ in ackTimes[username] ?? now }, ackOrder: order)
        }
    }
}

/// A change named a user, session, alarm or token with a NUL in it; nothing of its batch is applied.
public struct StoreKeyError: Error, CustomStringConvertible {
    public let key: String
    public init(key: String) { self.key = key }
    public var description: String { "refusing to store a key containing NUL: \(key.debugDescription)" }
}
