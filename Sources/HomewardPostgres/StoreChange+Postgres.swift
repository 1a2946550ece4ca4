import Foundation
import HomewardCore

extension StoreChange {
    /// Adds the SQL of this change to its write's batch (the same statements as the SQLite store's), which
    /// runs in one transaction. Keys with NUL were refused before the batch was built (`PostgresStore.applyChecked`).
    /// `now` is the time an acknowledgement not stored yet is stored with.
    func append(to batch: inout PostgresBatch, now: Int64) {
        func run(_ statement: PostgresBatchStatement) { batch.append(statement) }
        switch self {
        case let .createUser(profile, passwordHash, at):
            run("""
                INSERT INTO users (username, name, password_hash, created_at)
                VALUES (\(profile.username), \(Self.bytes(profile.name)), \(passwordHash), \(at))
                """)

        case let .createToken(hash, username, at):
            run("INSERT INTO tokens (hash, username, created_at, last_used) VALUES (\(hash), \(username), \(at), \(at))")

        case let .useToken(hash, at):
            run("UPDATE tokens SET last_used = \(at) WHERE hash = \(hash)")

        case let .revokeToken(hash):
            run("DELETE FROM tokens WHERE hash = \(hash)")

        case let .addFriendRequest(from, to, at):
            run("""
                INSERT INTO friend_requests (from_user, to_user, created_at) VALUES (\(from), \(to), \(at))
                ON CONFLICT DO NOTHING
                """)

        case let .removeFriendRequest(from, to):
            run("DELETE FROM friend_requests WHERE from_user = \(from) AND to_user = \(to)")

        case let .addFriendship(first, second, at):
            let (a, b) = Self.canonical(first, second)
            run("INSERT INTO friendships (user_a, user_b, created_at) VALUES (\(a), \(b), \(at)) ON CONFLICT DO NOTHING")

        case let .removeFriendship(first, second):
            let (a, b) = Self.canonical(first, second)
            run("DELETE FROM friendships WHERE user_a = \(a) AND user_b = \(b)")

        case let .addBlock(blocker, blocked, at):
            run("INSERT INTO blocks (blocker, blocked, created_at) VALUES (\(blocker), \(blocked), \(at)) ON CONFLICT DO NOTHING")

        case let .removeBlock(blocker, blocked):
            run("DELETE FROM blocks WHERE blocker = \(blocker) AND blocked = \(blocked)")

        case let .setAlarmContacts(owner, contacts):
            run("DELETE FROM alarm_contacts WHERE owner = \(owner)")
            // All rows in one statement: each one more would be one more round trip inside the transaction.
            let unique = Self.unique(contacts)
            guard !unique.isEmpty else { return }
            let positions = unique.indices.map(Int64.init)
            run("""
                INSERT INTO alarm_contacts (owner, contact, position)
                SELECT \(owner), contact, position FROM unnest(\(unique)::text[], \(positions)::bigint[]) AS t(contact, position)
                """)

        case let .saveSession(session):
            Self.save(session, run: run)

        case let .endSession(id, reason, at):
            run("""
                UPDATE sessions SET ended_at = \(at), end_reason = \(Self.bytes(reason)) WHERE id = \(id) AND ended_at IS NULL
                """)

        case let .saveAlarm(alarm):
            Self.save(alarm, now: now, run: run)

        case let .endAlarm(id, reason, at):
            run("""
                UPDATE alarms SET ended_at = \(at), end_reason = \(Self.bytes(reason)) WHERE id = \(id) AND ended_at IS NULL
                """)

        case let .lastSeen(username, at):
            run("UPDATE users SET last_seen = \(at) WHERE username = \(username)")

        case let .savePushSubscription(subscription):
            // One account per endpoint: whoever had it before loses it, with the pushes waiting for it.
            run("""
                DELETE FROM push_outbox WHERE subscription_id IN
                    (SELECT id FROM push_subscriptions WHERE endpoint = \(subscription.endpoint) AND id <> \(subscription.id))
                """)
            run("DELETE FROM push_subscriptions WHERE endpoint = \(subscription.endpoint) AND id <> \(subscription.id)")
            run("""
                INSERT INTO push_subscriptions (id, username, endpoint, p256dh, auth, created_at, token_hash)
                VALUES (\(subscription.id), \(subscription.username), \(subscription.endpoint), \(subscription.p256dh),
                        \(subscription.auth), \(subscription.createdAt), \(subscription.tokenHash))
                ON CONFLICT (id) DO UPDATE SET
                    username = excluded.username, endpoint = excluded.endpoint, p256dh = excluded.p256dh,
                    auth = excluded.auth, created_at = excluded.created_at, token_hash = excluded.token_hash
                """)

        case let .deletePushSubscription(id):
            run("DELETE FROM push_outbox WHERE subscription_id = \(id)")
            run("DELETE FROM push_subscriptions WHERE id = \(id)")

        case let .enqueueOutbox(entry):
            run("""
                INSERT INTO push_outbox (id, kind, subscription_id, endpoint, p256dh, auth, payload, urgency, topic,
                                         ttl, alarm_id, created_at, next_attempt_at, attempts)
                VALUES (\(entry.id), \(entry.kind.rawValue), \(entry.subscriptionId), \(entry.endpoint), \(entry.p256dh),
                        \(entry.auth), \(Data(entry.payload)), \(entry.urgency), \(entry.topic), \(Int64(entry.ttl)),
                        \(entry.alarmId), \(entry.createdAt), \(entry.nextAttemptAt), \(Int64(entry.attempts)))
                """)

        case let .cancelAlarmPushes(alarmId):
            run("DELETE FROM push_outbox WHERE alarm_id = \(alarmId) AND kind = \(OutboxEntry.Kind.webPush.rawValue)")

        case let .saveShare(share):
            run("""
                INSERT INTO shares (id, session_id, owner, token_hash, created_at, expires_at)
                VALUES (\(share.id), \(share.sessionId), \(share.owner), \(share.tokenHash), \(share.createdAt), \(share.expiresAt))
                """)

        case let .removeShare(id):
            run("DELETE FROM shares WHERE id = \(id)")

        case let .setStandingShare(owner, friends):
            run("DELETE FROM standing_shares WHERE owner = \(owner)")
            for (position, friend) in Self.unique(friends).enumerated() {
                run("INSERT INTO standing_shares (owner, friend, position) VALUES (\(owner), \(friend), \(Int64(position)))")
            }

        case let .savePause(pause):
            run("""
                INSERT INTO location_pauses (owner, from_user, until) VALUES (\(pause.owner), \(pause.key), \(pause.until))
                ON CONFLICT (owner, from_user) DO UPDATE SET until = excluded.until
                """)

        case let .removePause(owner, from):
            run("DELETE FROM location_pauses WHERE owner = \(owner) AND from_user = \(from ?? LocationPause.everyone)")

        case let .saveMeeting(meeting):
            run("""
                INSERT INTO meetings (id, owner, name, lat, lon, time, created_at)
                VALUES (\(meeting.id), \(meeting.owner), \(Self.bytes(meeting.name)), \(meeting.lat), \(meeting.lon), \(meeting.time),
                        \(meeting.createdAt))
                ON CONFLICT (id) DO NOTHING
                """)
            run("DELETE FROM meeting_invitees WHERE meeting_id = \(meeting.id)")
            for (position, invitee) in meeting.invitees.enumerated() {
                run("""
                    INSERT INTO meeting_invitees (meeting_id, username, position, response, queued_at, delivered_at)
                    VALUES (\(meeting.id), \(invitee.username), \(Int64(position)), \(invitee.response.rawValue), \(invitee.queuedAt),
                            \(invitee.deliveredAt))
                    """)
            }

        case let .removeMeeting(id):
            run("DELETE FROM meetings WHERE id = \(id)")

        case let .saveMessage(message):
            run("""
                INSERT INTO messages (id, sender, recipient, text, queued_at, delivered_at)
                VALUES (\(message.id), \(message.from), \(message.to), \(Self.bytes(message.text)), \(message.queuedAt),
                        \(message.deliveredAt))
                ON CONFLICT (id) DO UPDATE SET delivered_at = excluded.delivered_at
                """)

        case let .removeMessage(id):
            run("DELETE FROM messages WHERE id = \(id)")
        }
    }

    /// Free text as the BYTEA that holds it exactly (TEXT cannot hold NUL).
    static func bytes(_ text: String) -> Data { Data(text.utf8) }

    static func bytes(_ text: String?) -> Data? { text.map(bytes) }

    private static func save(_ session: FollowSession, run: (PostgresBatchStatement) -> Void) {
        let destination = session.destination
        run("""
            INSERT INTO sessions (id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius,
                                  expires_at, lost_since)
            VALUES (\(session.id), \(session.owner), \(bytes(session.note)), \(session.startedAt), \(session.checkInBy),
                    \(destination?.lat), \(destination?.lon), \(destination?.radius), \(session.expiresAt), \(session.lostSince))
            ON CONFLICT (id) DO UPDATE SET
                owner = excluded.owner, note = excluded.note, started_at = excluded.started_at,
                check_in_by = excluded.check_in_by, dest_lat = excluded.dest_lat, dest_lon = excluded.dest_lon,
                dest_radius = excluded.dest_radius, expires_at = excluded.expires_at, lost_since = excluded.lost_since
            """)
        run("DELETE FROM session_invitees WHERE session_id = \(session.id)")
        // All rows in one statement (one round trip, however many invitees).
        let rows = session.invitees.enumerated().compactMap { position, invitee in
            session.state(of: invitee).map { (invitee, $0.rawValue, Int64(position)) }
        }
        guard !rows.isEmpty else { return }
        run("""
            INSERT INTO session_invitees (session_id, username, state, position)
            SELECT \(session.id), username, state, position
            FROM unnest(\(rows.map(\.0))::text[], \(rows.map(\.1))::text[], \(rows.map(\.2))::bigint[]) AS t(username, state, position)
            """)
    }

    private static func save(_ alarm: Alarm, now: Int64, run: (PostgresBatchStatement) -> Void) {
        let position = alarm.position
        run("""
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

        // Recipients no longer listed go; the listed ones are written in one statement, however many there are.
        // An acknowledgement keeps the time it was first stored with (`now` for a new one). Arrays carry no
        // NULL here: -1 stands for none (times and orders are never negative).
        let recipients = alarm.storedRecipients(ackTimes: [:], now: now)
        run("DELETE FROM alarm_recipients WHERE alarm_id = \(alarm.id) AND NOT username = ANY(\(recipients.map(\.username))::text[])")
        guard !recipients.isEmpty else { return }
        let none: Int64 = -1
        run("""
            INSERT INTO alarm_recipients AS r (alarm_id, username, position, delivered_at, acked_at, ack_order)
            SELECT \(alarm.id), username, position, NULLIF(delivered_at, -1), NULLIF(acked_at, -1), NULLIF(ack_order, -1)
            FROM unnest(\(recipients.map(\.username))::text[], \(recipients.map(\.position))::bigint[],
                        \(recipients.map { $0.deliveredAt ?? none })::bigint[], \(recipients.map { $0.ackedAt ?? none })::bigint[],
                        \(recipients.map { $0.ackOrder ?? none })::bigint[])
                AS t(username, position, delivered_at, acked_at, ack_order)
            ON CONFLICT (alarm_id, username) DO UPDATE SET
                position = excluded.position, delivered_at = excluded.delivered_at, ack_order = excluded.ack_order,
                acked_at = CASE WHEN excluded.ack_order IS NULL THEN NULL ELSE coalesce(r.acked_at, excluded.acked_at) END
            """)
    }
}
