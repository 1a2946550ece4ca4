import Foundation
import GRDB
import HomewardCore
import HomewardProtocol

extension StoreChange {
    /// Runs the SQL of this change inside the caller's transaction.
    func execute(in db: Database) throws {
        try ExactText.checkKeys(of: self)
        switch self {
        case let .createUser(profile, passwordHash, at):
            try db.execute(
                sql: "INSERT INTO users (username, name, password_hash, created_at) VALUES (?, ?, ?, ?)",
                arguments: [profile.username, ExactText.blob(profile.name), passwordHash, at])

        case let .createToken(hash, username, at):
            try db.execute(
                sql: "INSERT INTO tokens (hash, username, created_at, last_used) VALUES (?, ?, ?, ?)",
                arguments: [hash, username, at, at])

        case let .useToken(hash, at):
            try db.execute(sql: "UPDATE tokens SET last_used = ? WHERE hash = ?", arguments: [at, hash])

        case let .revokeToken(hash):
            try db.execute(sql: "DELETE FROM tokens WHERE hash = ?", arguments: [hash])

        case let .addFriendRequest(from, to, at):
            try db.execute(
                sql: "INSERT OR IGNORE INTO friend_requests (from_user, to_user, created_at) VALUES (?, ?, ?)",
                arguments: [from, to, at])

        case let .removeFriendRequest(from, to):
            try db.execute(
                sql: "DELETE FROM friend_requests WHERE from_user = ? AND to_user = ?", arguments: [from, to])

        case let .addFriendship(first, second, at):
            let (a, b) = Self.canonical(first, second)
            try db.execute(
                sql: "INSERT OR IGNORE INTO friendships (user_a, user_b, created_at) VALUES (?, ?, ?)",
                arguments: [a, b, at])

        case let .removeFriendship(first, second):
            let (a, b) = Self.canonical(first, second)
            try db.execute(sql: "DELETE FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b])

        case let .addBlock(blocker, blocked, at):
            try db.execute(
                sql: "INSERT OR IGNORE INTO blocks (blocker, blocked, created_at) VALUES (?, ?, ?)",
                arguments: [blocker, blocked, at])

        case let .removeBlock(blocker, blocked):
            try db.execute(sql: "DELETE FROM blocks WHERE blocker = ? AND blocked = ?", arguments: [blocker, blocked])

        case let .setAlarmContacts(owner, contacts):
            try db.execute(sql: "DELETE FROM alarm_contacts WHERE owner = ?", arguments: [owner])
            for (position, contact) in Self.unique(contacts).enumerated() {
                try db.execute(
                    sql: "INSERT INTO alarm_contacts (owner, contact, position) VALUES (?, ?, ?)",
                    arguments: [owner, contact, position])
            }

        case let .saveSession(session):
            try Self.save(session, in: db)

        case let .endSession(id, reason, at):
            try db.execute(
                sql: "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
                arguments: [at, ExactText.blob(reason), id])

        case let .saveAlarm(alarm):
            try Self.save(alarm, in: db)

        case let .endAlarm(id, reason, at):
            try db.execute(
                sql: "UPDATE alarms SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
                arguments: [at, ExactText.blob(reason), id])

        case let .lastSeen(username, at):
            try db.execute(sql: "UPDATE users SET last_seen = ? WHERE username = ?", arguments: [at, username])

        case let .savePushSubscription(subscription):
            // One account per endpoint: whoever had it before loses it, with the pushes waiting for it.
            let others = "SELECT id FROM push_subscriptions WHERE endpoint = ? AND id <> ?"
            try db.execute(sql: "DELETE FROM push_outbox WHERE subscription_id IN (\(others))",
                           arguments: [subscription.endpoint, subscription.id])
            try db.execute(sql: "DELETE FROM push_subscriptions WHERE id IN (\(others))", arguments: [subscription.endpoint, subscription.id])
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO push_subscriptions (id, username, endpoint, p256dh, auth, created_at, token_hash)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [subscription.id, subscription.username, subscription.endpoint, subscription.p256dh,
                            subscription.auth, subscription.createdAt, subscription.tokenHash])

        case let .deletePushSubscription(id):
            try db.execute(sql: "DELETE FROM push_outbox WHERE subscription_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM push_subscriptions WHERE id = ?", arguments: [id])

        case let .enqueueOutbox(entry):
            try db.execute(
                sql: """
                    INSERT INTO push_outbox (id, kind, subscription_id, endpoint, p256dh, auth, payload, urgency, topic,
                                             ttl, alarm_id, created_at, next_attempt_at, attempts)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [entry.id, entry.kind.rawValue, entry.subscriptionId, entry.endpoint, entry.p256dh, entry.auth,
                            Data(entry.payload), entry.urgency, entry.topic, entry.ttl, entry.alarmId, entry.createdAt,
                            entry.nextAttemptAt, entry.attempts])

        case let .cancelAlarmPushes(alarmId):
            try db.execute(sql: "DELETE FROM push_outbox WHERE alarm_id = ? AND kind = ?",
                           arguments: [alarmId, OutboxEntry.Kind.webPush.rawValue])

        case let .saveShare(share):
            try db.execute(
                sql: "INSERT INTO shares (id, session_id, owner, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [share.id, share.sessionId, share.owner, share.tokenHash, share.createdAt, share.expiresAt])

        case let .removeShare(id):
            // Deleted, not marked: an ended link is of no use to anyone, and its hash need not be kept.
            try db.execute(sql: "DELETE FROM shares WHERE id = ?", arguments: [id])

        case let .setStandingShare(owner, friends):
            try db.execute(sql: "DELETE FROM standing_shares WHERE owner = ?", arguments: [owner])
            for (position, friend) in Self.unique(friends).enumerated() {
                try db.execute(sql: "INSERT INTO standing_shares (owner, friend, position) VALUES (?, ?, ?)",
                               arguments: [owner, friend, position])
            }

        case let .savePause(pause):
            try db.execute(
                sql: """
                    INSERT INTO location_pauses (owner, from_user, until) VALUES (?, ?, ?)
                    ON CONFLICT(owner, from_user) DO UPDATE SET until = excluded.until
                    """,
                arguments: [pause.owner, pause.key, pause.until])

        case let .removePause(owner, from):
            try db.execute(sql: "DELETE FROM location_pauses WHERE owner = ? AND from_user = ?",
                           arguments: [owner, from ?? LocationPause.everyone])

        case let .saveMeeting(meeting):
            try Self.save(meeting, in: db)

        case let .removeMeeting(id):
            try db.execute(sql: "DELETE FROM meetings WHERE id = ?", arguments: [id])

        case let .saveMessage(message):
            try db.execute(
                sql: """
                    INSERT INTO messages (id, sender, recipient, text, queued_at, delivered_at) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET delivered_at = excluded.delivered_at
                    """,
                arguments: [message.id, message.from, message.to, ExactText.blob(message.text), message.queuedAt, message.deliveredAt])

        case let .removeMessage(id):
            try db.execute(sql: "DELETE FROM messages WHERE id = ?", arguments: [id])
        }
    }

    private static func save(_ meeting: MeetingPoint, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO meetings (id, owner, name, lat, lon, time, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO NOTHING
                """,
            arguments: [meeting.id, meeting.owner, ExactText.blob(meeting.name), meeting.lat, meeting.lon, meeting.time,
                        meeting.createdAt])
        try db.execute(sql: "DELETE FROM meeting_invitees WHERE meeting_id = ?", arguments: [meeting.id])
        for (position, invitee) in meeting.invitees.enumerated() {
            try db.execute(
                sql: """
                    INSERT INTO meeting_invitees (meeting_id, username, position, response, queued_at, delivered_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [meeting.id, invitee.username, position, invitee.response.rawValue, invitee.queuedAt, invitee.deliveredAt])
        }
    }

    private static func save(_ session: FollowSession, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO sessions (id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius,
                                      expires_at, lost_since)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET
                    owner = excluded.owner, note = excluded.note, started_at = excluded.started_at,
                    check_in_by = excluded.check_in_by, dest_lat = excluded.dest_lat, dest_lon = excluded.dest_lon,
                    dest_radius = excluded.dest_radius, expires_at = excluded.expires_at, lost_since = excluded.lost_since
                """,
            arguments: [
                session.id, session.owner, ExactText.blob(session.note), session.startedAt, session.checkInBy,
                session.destination?.lat, session.destination?.lon, session.destination?.radius,
                session.expiresAt, session.lostSince,
            ])
        try db.execute(sql: "DELETE FROM session_invitees WHERE session_id = ?", arguments: [session.id])
        for (position, invitee) in session.invitees.enumerated() {
            guard let state = session.state(of: invitee) else { continue }
            try db.execute(
                sql: "INSERT INTO session_invitees (session_id, username, state, position) VALUES (?, ?, ?, ?)",
                arguments: [session.id, invitee, state.rawValue, position])
        }
    }

    private static func save(_ alarm: Alarm, in db: Database) throws {
        let position = alarm.position
        try db.execute(
            sql: """
                INSERT INTO alarms (id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto,
                                    repeats, next_repeat_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET
                    owner = excluded.owner, text = excluded.text,
                    lat = excluded.lat, lon = excluded.lon, acc = excluded.acc, alt = excluded.alt,
                    spd = excluded.spd, hdg = excluded.hdg, batt = excluded.batt, pos_ts = excluded.pos_ts,
                    created_at = excluded.created_at, auto = excluded.auto,
                    repeats = excluded.repeats, next_repeat_at = excluded.next_repeat_at
                """,
            arguments: [
                alarm.id, alarm.owner, ExactText.blob(alarm.text),
                position?.lat, position?.lon, position?.acc, position?.alt,
                position?.spd, position?.hdg, position?.batt, position?.ts,
                alarm.createdAt, alarm.auto, alarm.repeats, alarm.nextRepeatAt,
            ])

        var ackTimes: [String: Int64] = [:]
        let rows = try Row.fetchCursor(
            db, sql: "SELECT username, acked_at FROM alarm_recipients WHERE alarm_id = ? AND acked_at IS NOT NULL",
            arguments: [alarm.id])
        while let row = try rows.next() { ackTimes[row["username"]] = row["acked_at"] }
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())

        try db.execute(sql: "DELETE FROM alarm_recipients WHERE alarm_id = ?", arguments: [alarm.id])
        for recipient in alarm.storedRecipients(ackTimes: ackTimes, now: now) {
            try db.execute(
                sql: """
                    INSERT INTO alarm_recipients (alarm_id, username, position, delivered_at, acked_at, ack_order)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [alarm.id, recipient.username, recipient.position, recipient.deliveredAt, recipient.ackedAt,
                            recipient.ackOrder])
        }
    }
}
