import Foundation
import HomewardCore
import HomewardProtocol
import Logging
import PostgresNIO

extension StoredState {
    /// Reads everything the relay keeps in memory (the same rows, in the same order, as the SQLite store),
    /// inside the caller's transaction, which makes the reads consistent (`PostgresStore.load`: under the
    /// write lock, shared).
    init(db: PostgresConnection, logger: Logger) async throws {
        self.init()
        func rows(_ query: PostgresQuery) async throws -> PostgresRowSequence { try await db.query(query, logger: logger) }
        for try await (username, name, seen) in try await rows(
            "SELECT username, name, last_seen FROM users ORDER BY created_at, username"
        ).decode((String, Data, Int64?).self) {
            users.append(UserProfile(username: username, name: Self.text(name)))
            if let seen { lastSeen[username] = seen }
        }

        for try await (hash, username, created, used) in try await rows(
            "SELECT hash, username, created_at, last_used FROM tokens"
        ).decode((String, String, Int64, Int64).self) {
            tokens.append(IssuedToken(hash: hash, username: username, createdAt: created, lastUsed: used))
        }

        for try await pair in try await rows("SELECT user_a, user_b FROM friendships ORDER BY created_at, user_a, user_b")
            .decode((String, String).self) { friendships.append(pair) }

        for try await (from, to) in try await rows(
            "SELECT from_user, to_user FROM friend_requests ORDER BY created_at, from_user, to_user"
        ).decode((String, String).self) { friendRequests.append((from: from, to: to)) }

        for try await (blocker, blocked) in try await rows("SELECT blocker, blocked FROM blocks ORDER BY blocker, blocked")
            .decode((String, String).self) { blocks.append((blocker: blocker, blocked: blocked)) }

        for try await (owner, contact) in try await rows("SELECT owner, contact FROM alarm_contacts ORDER BY owner, position")
            .decode((String, String).self) { alarmContacts[owner, default: []].append(contact) }

        sessions = try await Self.activeSessions(rows)
        alarms = try await Self.activeAlarms(rows)

        for try await (id, sessionId, owner, hash, created, expires) in try await rows(
            "SELECT id, session_id, owner, token_hash, created_at, expires_at FROM shares ORDER BY created_at, id"
        ).decode((String, String, String, String, Int64, Int64).self) {
            shares.append(ShareLink(id: id, sessionId: sessionId, owner: owner, tokenHash: hash, createdAt: created, expiresAt: expires))
        }

        for try await (id, username, endpoint, p256dh, auth, created, token) in try await rows(
            "SELECT id, username, endpoint, p256dh, auth, created_at, token_hash FROM push_subscriptions ORDER BY created_at, id"
        ).decode((String, String, String, String, String, Int64, String?).self) {
            pushSubscriptions.append(PushSubscription(id: id, username: username, endpoint: endpoint, p256dh: p256dh,
                                                      auth: auth, createdAt: created, tokenHash: token))
        }
        try await loadFriendsMap(rows)
    }

    /// Issue 15: standing shares, pauses, meeting points and unread messages (the SQLite store's rows and order).
    private mutating func loadFriendsMap(_ rows: (PostgresQuery) async throws -> PostgresRowSequence) async throws {
        for try await (owner, friend) in try await rows("SELECT owner, friend FROM standing_shares ORDER BY owner, position")
            .decode((String, String).self) { standingShares[owner, default: []].append(friend) }
        for try await (owner, from, until) in try await rows(
            "SELECT owner, from_user, until FROM location_pauses ORDER BY owner, from_user"
        ).decode((String, String, Int64?).self) {
            pauses.append(LocationPause(owner: owner, from: from.isEmpty ? nil : from, until: until))
        }
        var invitees: [String: [MeetingInvitee]] = [:]
        for try await (id, username, raw, queued, delivered) in try await rows(
            "SELECT meeting_id, username, response, queued_at, delivered_at FROM meeting_invitees ORDER BY meeting_id, position"
        ).decode((String, String, String, Int64, Int64?).self) {
            guard let response = MeetingInvitee.Response(rawValue: raw) else {
                throw PostgresStoreError.failed(operation: "load", reason: "unknown meeting response \(raw)")
            }
            invitees[id, default: []].append(MeetingInvitee(username: username, response: response, queuedAt: queued, deliveredAt: delivered))
        }
        for try await (id, owner, name, lat, lon, time, created) in try await rows(
            "SELECT id, owner, name, lat, lon, time, created_at FROM meetings ORDER BY created_at, id"
        ).decode((String, String, Data, Double, Double, Int64, Int64).self) {
            meetings.append(MeetingPoint(id: id, owner: owner, name: Self.text(name), lat: lat, lon: lon, time: time, createdAt: created,
                                         invitees: invitees[id] ?? []))
        }
        for try await (id, sender, recipient, body, queued, delivered) in try await rows(
            "SELECT id, sender, recipient, text, queued_at, delivered_at FROM messages ORDER BY queued_at, id"
        ).decode((String, String, String, Data, Int64, Int64?).self) {
            messages.append(MessageInfo(id: id, from: sender, to: recipient, text: Self.text(body), queuedAt: queued, deliveredAt: delivered))
        }
    }

    private static func text(_ bytes: Data) -> String { String(decoding: bytes, as: UTF8.self) }

    private static func activeSessions(
        _ rows: (PostgresQuery) async throws -> PostgresRowSequence
    ) async throws -> [FollowSession] {
        var sessions: [FollowSession] = []
        var index: [String: Int] = [:]
        let sessionRows = try await rows("""
            SELECT id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius, expires_at, lost_since
            FROM sessions WHERE ended_at IS NULL ORDER BY started_at, id
            """)
        for try await (id, owner, note, started, checkInBy, lat, lon, radius, expires, lost) in sessionRows.decode(
            (String, String, Data?, Int64, Int64?, Double?, Double?, Double?, Int64?, Int64?).self)
        {
            index[id] = sessions.count
            var session = FollowSession(id: id, owner: owner, note: note.map(text), startedAt: started)
            session.checkInBy = checkInBy
            if let lat, let lon, let radius { session.destination = Destination(lat: lat, lon: lon, radius: radius) }
            session.expiresAt = expires
            session.lostSince = lost
            sessions.append(session)
        }
        let invitees = try await rows("""
            SELECT i.session_id, i.username, i.state FROM session_invitees i
            JOIN sessions s ON s.id = i.session_id
            WHERE s.ended_at IS NULL
            ORDER BY i.session_id, i.position
            """)
        for try await (id, username, raw) in invitees.decode((String, String, String).self) {
            guard let at = index[id] else { continue }
            guard let state = FollowSession.InviteState(rawValue: raw) else {
                throw PostgresStoreError.failed(operation: "load", reason: "unknown invite state \(raw) in session \(id)")
            }
            sessions[at].set(state, for: username)
        }
        return sessions
    }

    private static func activeAlarms(_ rows: (PostgresQuery) async throws -> PostgresRowSequence) async throws -> [Alarm] {
        struct Recipients {
            var ordered: [String] = []
            var acked: [(order: Int64, username: String)] = []
            var deliveredAt: [String: Int64] = [:]
        }
        var recipients: [String: Recipients] = [:]
        let recipientRows = try await rows("""
            SELECT r.alarm_id, r.username, r.delivered_at, r.ack_order FROM alarm_recipients r
            JOIN alarms a ON a.id = r.alarm_id
            WHERE a.ended_at IS NULL
            ORDER BY r.alarm_id, r.position
            """)
        for try await (id, username, delivered, order) in recipientRows.decode((String, String, Int64?, Int64?).self) {
            recipients[id, default: Recipients()].ordered.append(username)
            if let order { recipients[id]!.acked.append((order, username)) }
            if let delivered { recipients[id]!.deliveredAt[username] = delivered }
        }

        var alarms: [Alarm] = []
        let alarmRows = try await rows("""
            SELECT id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto, repeats, next_repeat_at
            FROM alarms WHERE ended_at IS NULL ORDER BY created_at, id
            """)
        for try await row in alarmRows {
            let (id, owner, body, lat, lon, acc, alt, spd, hdg, batt, ts, created, auto, repeats, nextRepeat) = try row.decode(
                (String, String, Data, Double?, Double?, Double?, Double?, Double?, Double?, Double?, Int64?, Int64, Bool,
                 Int64, Int64?).self)
            var position: Position?
            if let lat, let lon, let ts {
                position = Position(lat: lat, lon: lon, acc: acc, alt: alt, spd: spd, hdg: hdg, batt: batt, ts: ts)
            }
            let stored = recipients[id] ?? Recipients()
            var alarm = Alarm(id: id, owner: owner, text: text(body), position: position, createdAt: created, auto: auto,
                              recipients: stored.ordered)
            alarm.restore(acked: stored.acked.sorted { $0.order < $1.order }.map(\.username))
            alarm.deliveredAt = stored.deliveredAt
            alarm.repeats = Int(repeats)
            alarm.nextRepeatAt = nextRepeat
            alarms.append(alarm)
        }
        return alarms
    }
}
