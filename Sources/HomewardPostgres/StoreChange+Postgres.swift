import Foundation
import HomewardCore
import Logging
import PostgresNIO

extension StoreChange {
    /// Runs the SQL of this change inside the caller's transaction (the same statements as the SQLite
    /// store's). Keys with NUL were refused before the transaction began (`PostgresStore.apply`).
    func execute(on db: PostgresConnection, logger: Logger) async throws {
        func run(_ query: PostgresQuery) async throws { try await db.query(query, logger: logger) }
        switch self {
        case let .createUser(profile, passwordHash, at):
            try await run("""
                INSERT INTO users (username, name, password_hash, created_at)
                VALUES (\(profile.username), \(Self.bytes(profile.name)), \(passwordHash), \(at))
                """)

        case let .createToken(hash, username, at):
            try await run("INSERT INTO tokens (hash, username, created_at, last_used) VALUES (\(hash), \(username), \(at), \(at))")

        case let .useToken(hash, at):
            try await run("UPDATE tokens SET last_used = \(at) WHERE hash = \(hash)")

        case let .revokeToken(hash):
            try await run("DELETE FROM tokens WHERE hash = \(hash)")

        case let .addFriendRequest(from, to, at):
            try await run("""
                INSERT INTO friend_requests (from_user, to_user, created_at) VALUES (\(from), \(to), \(at))
                ON CONFLICT DO NOTHING
                """)

        case let .removeFriendRequest(from, to):
            try await run("DELETE FROM friend_requests WHERE from_user = \(from) AND to_user = \(to)")

        case let .addFriendship(first, second, at):
            let (a, b) = Self.canonical(first, second)
            try await run("INSERT INTO friendships (user_a, user_b, created_at) VALUES (\(a), \(b), \(at)) ON CONFLICT DO NOTHING")

        case let .removeFriendship(first, second):
            let (a, b) = Self.canonical(first, second)
            try await run("DELETE FROM friendships WHERE user_a = \(a) AND user_b = \(b)")

        case let .addBlock(blocker, blocked, at):
            try await run("INSERT INTO blocks (blocker, blocked, created_at) VALUES (\(blocker), \(blocked), \(at)) ON CONFLICT DO NOTHING")

        case let .removeBlock(blocker, blocked):
            try await run("DELETE FROM blocks WHERE blocker = \(blocker) AND blocked = \(blocked)")

        case let .setAlarmContacts(owner, contacts):
            try await run("DELETE FROM alarm_contacts WHERE owner = \(owner)")
            // All rows in one statement: each one more would be one more round trip inside the transaction.
            let unique = Self.unique(contacts)
            guard !unique.isEmpty else { return }
            let positions = unique.indices.map(Int64.init)
            try await run("""
                INSERT INTO alarm_contacts (owner, contact, position)
                SELECT \(owner), contact, position FROM unnest(\(unique)::text[], \(positions)::bigint[]) AS t(contact, position)
                """)

        case let .saveSession(session):
            try await Self.save(session, run: run)

        case let .endSession(id, reason, at):
            try await run("""
                UPDATE sessions SET ended_at = \(at), end_reason = \(Self.bytes(reason)) WHERE id = \(id) AND ended_at IS NULL
                """)

        case let .saveAlarm(alarm):
            try await Self.save(alarm, on: db, logger: logger, run: run)

        case let .endAlarm(id, reason, at):
            try await run("""
                UPDATE alarms SET ended_at = \(at), end_reason = \(Self.bytes(reason)) WHERE id = \(id) AND ended_at IS NULL
                """)

        case let .lastSeen(username, at):
            try await run("UPDATE users SET last_seen = \(at) WHERE username = \(username)")

        case let .savePushSubscription(subscription):
            // One account per endpoint: whoever had it before loses it, with the pushes waiting for it.
            try await run("""
                DELETE FROM push_outbox WHERE subscription_id IN
                    (SELECT id FROM push_subscriptions WHERE endpoint = \(subscription.endpoint) AND id <> \(subscription.id))
                """)
            try await run("DELETE FROM push_subscriptions WHERE endpoint = \(subscription.endpoint) AND id <> \(subscription.id)")
            try await run("""
                INSERT INTO push_subscriptions (id, username, endpoint, p256dh, auth, created_at, token_hash)
                VALUES (\(subscription.id), \(subscription.username), \(subscription.endpoint), \(subscription.p256dh),
                        \(subscription.auth), \(subscription.createdAt), \(subscription.tokenHash))
                ON CONFLICT (id) DO UPDATE SET
                    username = excluded.username, endpoint = excluded.endpoint, p256dh = excluded.p256dh,
                    auth = excluded.auth, created_at = excluded.created_at, token_hash = excluded.token_hash
                """)

        case let .deletePushSubscription(id):
            try await run("DELETE FROM push_outbox WHERE subscription_id = \(id)")
            try await run("DELETE FROM push_subscriptions WHERE id = \(id)")

        case let .enqueueOutbox(entry):
            try await run("""
                INSERT INTO push_outbox (id, kind, subscription_id, endpoint, p256dh, auth, payload, urgency, topic,
                                         ttl, alarm_id, created_at, next_attempt_at, attempts)
                VALUES (\(entry.id), \(entry.kind.rawValue), \(entry.subscriptionId), \(entry.endpoint), \(entry.p256dh),
                        \(entry.auth), \(Data(entry.payload)), \(entry.urgency), \(entry.topic), \(Int64(entry.ttl)),
                        \(entry.alarmId), \(entry.createdAt), \(entry.nextAttemptAt), \(Int64(entry.attempts)))
                """)

        case let .cancelAlarmPushes(alarmId):
            try await run("DELETE FROM push_outbox WHERE alarm_id = \(alarmId) AND kind = \(OutboxEntry.Kind.webPush.rawValue)")

        case let .saveShare(share):
            try await run("""
                INSERT INTO shares (id, session_id, owner, token_hash, created_at, expires_at)
                VALUES (\(share.id), \(share.sessionId), \(share.owner), \(share.tokenHash), \(share.createdAt), \(share.expiresAt))
                """)

        case let .removeShare(id):
            try await run("DELETE FROM shares WHERE id = \(id)")

        case let .setStandingShare(owner, friends):
            try await run("DELETE FROM standing_shares WHERE owner = \(owner)")
            for (position, friend) in Self.unique(friends).enumerated() {
                try await run("INSERT INTO standing_shares (owner, friend, position) VALUES (\(owner), \(friend), \(Int64(position)))")
            }

        case let .savePause(pause):
            try await run("""
                INSERT INTO location_pauses (owner, from_user, until) VALUES (\(pause.owner), \(pause.key), \(pause.until))
                ON CONFLICT (owner, from_user) DO UPDATE SET until = excluded.until
                """)

        case let .removePause(owner, from):
            try await run("DELETE FROM location_pauses WHERE owner = \(owner) AND from_user = \(from ?? LocationPause.everyone)")

        case let .saveMeeting(meeting):
            try await run("""
                INSERT INTO meetings (id, owner, name, lat, lon, time, created_at)
                VALUES (\(meeting.id), \(meeting.owner), \(Self.bytes(meeting.name)), \(meeting.lat), \(meeting.lon), \(meeting.time),
                        \(meeting.createdAt))
                ON CONFLICT (id) DO NOTHING
                """)
            try await run("DELETE FROM meeting_invitees WHERE meeting_id = \(meeting.id)")
            for (position, invitee) in meeting.invitees.enumerated() {
                try await run("""
                    INSERT INTO meeting_invitees (meeting_id, username, position, response, queued_at, delivered_at)
                    VALUES (\(meeting.id), \(invitee.username), \(Int64(position)), \(invitee.response.rawValue), \(invitee.queuedAt),
                            \(invitee.deliveredAt))
                    """)
            }

        case let .removeMeeting(id):
            try await run("DELETE FROM meetings WHERE id = \(id)")

        case let .saveMessage(message):
            try await run("""
                INSERT INTO messages (id, sender, recipient, text, queued_at, delivered_at)
                VALUES (\(message.id), \(message.from), \(message.to), \(Self.bytes(message.text)), \(message.queuedAt),
                        \(message.deliveredAt))
                ON CONFLICT (id) DO UPDATE SET delivered_at = excluded.delivered_at
                """)

        case let .removeMessage(id):
            try await run("DELETE FROM messages WHERE id = \(id)")
        }
    }

    /// Free text as the BYTEA that holds it exactly (TEXT cannot hold NUL).
    static func bytes(_ text: String) -> Data { Data(text.utf8) }

    static func bytes(_ text: String?) -> Data? { text.map(bytes) }

    private static func save(_ session: FollowSession, run: (PostgresQuery) async throws -> Void) async throws {
        let destination = session.destination
        try await run("""
            INSERT INTO sessions (id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius,
                                  expires_at, lost_since)
            VALUES (\(session.id), \(session.owner), \(bytes(session.note)), \(session.startedAt), \(session.checkInBy),
                    \(destination?.lat), \(destination?.lon), \(destination?.radius), \(session.expiresAt), \(session.lostSince))
            ON CONFLICT (id) DO UPDATE SET
                owner = excluded.owner, note = excluded.note, started_at = excluded.started_at,
                check_in_by = excluded.check_in_by, dest_lat = excluded.dest_lat, dest_lon = excluded.dest_lon,
                dest_radius = excluded.dest_radius, expires_at = excluded.expires_at, lost_since = excluded.lost_since
            """)
        try await run("DELETE FROM session_invitees WHERE session_id = \(session.id)")
        // All rows in one statement (one round trip, however many invitees).
        let rows = session.invitees.enumerated().compactMap { position, invitee in
            session.state(of: invitee).map { (invitee, $0.rawValue, Int64(position)) }
        }
        guard !rows.isEmpty else { return }
        try await run("""
            INSERT INTO session_invitees (session_id, username, state, position)
            SELECT \(session.id), username, state, position
            FROM unnest(\(rows.map(\.0))::text[], \(rows.map(\.1))::text[], \(rows.map(\.2))::bigint[]) AS t(username, state, position)
            """)
    }

    private static func save(_ alarm: Alarm, on db: PostgresConnection, logger: Logger,
                             run: (PostgresQuery) async throws -> Void) async throws {
        let position = alarm.position
        try await run("""
            INSERT INTO alarms (id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto,
                                repeats, next_repeat_at)
            VALUES (\(alarm.id), \(alarm.owner), \(bytes(alarm.text)), \(position?.lat), \(position?.lon), \(position?.acc),
                    \(position?.alt), \(position?.spd), \(position?.hdg), \(position?.batt), \(position?.ts),
                    \(alarm.createdAt), \(alarm.auto), \(Int64(alarm.repeats)), \(alarm.nextRepeatAt))
            ON CONFLICT (id) DO UPDATE SET
                owner = excluded.owner, text = excluded.text,
                lat = excluded.lat, lon = excluded.lon, acc = excluded.acc, alt = excluded.alt,
                spd = excluded.spd, hdg = excluded.hdg, batt = excluded.batt, pos_ts = excluded.pos_ts,
                created_at = excluded.created_at, auto = excluded.auto,
                repeats = excluded.repeats, next_repeat_at = excluded.next_repeat_at
            """)

        var ackTimes: [String: Int64] = [:]
        let rows = try await db.query(
            "SELECT username, acked_at FROM alarm_recipients WHERE alarm_id = \(alarm.id) AND acked_at IS NOT NULL",
            logger: logger)
        for try await (username, at) in rows.decode((String, Int64).self) { ackTimes[username] = at }
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())

        try await run("DELETE FROM alarm_recipients WHERE alarm_id = \(alarm.id)")
        // All rows in one statement (one round trip, however many recipients: a panic to 50 friends on a
        // PostgreSQL in another zone waits for one, not 50). Arrays carry no NULL here: -1 stands for none
        // (times and orders are never negative).
        let recipients = alarm.storedRecipients(ackTimes: ackTimes, now: now)
        guard !recipients.isEmpty else { return }
        let none: Int64 = -1
        try await run("""
            INSERT INTO alarm_recipients (alarm_id, username, position, delivered_at, acked_at, ack_order)
            SELECT \(alarm.id), username, position, NULLIF(delivered_at, -1), NULLIF(acked_at, -1), NULLIF(ack_order, -1)
            FROM unnest(\(recipients.map(\.username))::text[], \(recipients.map(\.position))::bigint[],
                        \(recipients.map { $0.deliveredAt ?? none })::bigint[], \(recipients.map { $0.ackedAt ?? none })::bigint[],
                        \(recipients.map { $0.ackOrder ?? none })::bigint[])
                AS t(username, position, delivered_at, acked_at, ack_order)
            """)
    }
}
