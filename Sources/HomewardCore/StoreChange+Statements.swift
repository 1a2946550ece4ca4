import HomewardProtocol

/// What each change writes, once for both stores: the SQLite store binds these statements with GRDB, the
/// PostgreSQL store runs them through `homeward_write`, each placeholder a typed read of the statement's JSON
/// parameter (`PostgresBatch`). A new change is one case here, and one in each other exhaustive switch over
/// `StoreChange` (`RelayState.apply`, `RelayState.writeScope`, the bus codec's two); the compiler finds them.
extension StoreChange {
    /// The statements that store this change, to be run in order in the caller's transaction. `now` is the
    /// time a recipient's first seen acknowledgement is stored with (`Alarm.storedRecipients`).
    public func statements(at now: Int64) -> [StoredStatement] {
        typealias S = StoredStatement
        switch self {
        case let .createUser(profile, passwordHash, at):
            return [S("INSERT INTO users (username, name, password_hash, created_at) VALUES (?, ?, ?, ?)",
                      [.text(profile.username), .freeText(profile.name), .text(passwordHash), .int(at)])]

        case let .createToken(hash, username, at):
            return [S("INSERT INTO tokens (hash, username, created_at, last_used) VALUES (?, ?, ?, ?)",
                      [.text(hash), .text(username), .int(at), .int(at)])]

        case let .useToken(hash, at):
            return [S("UPDATE tokens SET last_used = ? WHERE hash = ?", [.int(at), .text(hash)])]

        case let .revokeToken(hash):
            return [S("DELETE FROM tokens WHERE hash = ?", [.text(hash)])]

        case let .addFriendRequest(from, to, at):
            return [S("INSERT INTO friend_requests (from_user, to_user, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                      [.text(from), .text(to), .int(at)])]

        case let .removeFriendRequest(from, to):
            return [S("DELETE FROM friend_requests WHERE from_user = ? AND to_user = ?", [.text(from), .text(to)])]

        case let .addFriendship(first, second, at):
            let (a, b) = Self.canonical(first, second)
            return [S("INSERT INTO friendships (user_a, user_b, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                      [.text(a), .text(b), .int(at)])]

        case let .removeFriendship(first, second):
            let (a, b) = Self.canonical(first, second)
            return [S("DELETE FROM friendships WHERE user_a = ? AND user_b = ?", [.text(a), .text(b)])]

        case let .addBlock(blocker, blocked, at):
            return [S("INSERT INTO blocks (blocker, blocked, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                      [.text(blocker), .text(blocked), .int(at)])]

        case let .removeBlock(blocker, blocked):
            return [S("DELETE FROM blocks WHERE blocker = ? AND blocked = ?", [.text(blocker), .text(blocked)])]

        case let .setAlarmContacts(owner, contacts):
            return [S("DELETE FROM alarm_contacts WHERE owner = ?", [.text(owner)])]
                + S.insert(into: "alarm_contacts", ["owner", "contact", "position"],
                           rows: Self.unique(contacts).enumerated().map { [.text(owner), .text($1), .int(Int64($0))] })

        case let .saveSession(session):
            return Self.statements(saving: session)

        case let .endSession(id, reason, at):
            return [S("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
                      [.int(at), .freeText(reason), .text(id)])]

        case let .saveAlarm(alarm):
            return Self.statements(saving: alarm, at: now)

        case let .endAlarm(id, reason, at):
            return [S("UPDATE alarms SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
                      [.int(at), .freeText(reason), .text(id)])]

        case let .lastSeen(username, at):
            return [S("UPDATE users SET last_seen = ? WHERE username = ?", [.int(at), .text(username)])]

        case let .savePushSubscription(subscription):
            // One account per endpoint: whoever had it before loses it, with the pushes waiting for it.
            let others: [StoredValue] = [.text(subscription.endpoint), .text(subscription.id)]
            return [
                S("DELETE FROM push_outbox WHERE subscription_id IN (SELECT id FROM push_subscriptions WHERE endpoint = ? AND id <> ?)",
                  others),
                S("DELETE FROM push_subscriptions WHERE endpoint = ? AND id <> ?", others),
                S("""
                    INSERT INTO push_subscriptions (id, username, endpoint, p256dh, auth, created_at, token_hash)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET
                        username = excluded.username, endpoint = excluded.endpoint, p256dh = excluded.p256dh,
                        auth = excluded.auth, created_at = excluded.created_at, token_hash = excluded.token_hash
                    """,
                  [.text(subscription.id), .text(subscription.username), .text(subscription.endpoint), .text(subscription.p256dh),
                   .text(subscription.auth), .int(subscription.createdAt), .init(text: subscription.tokenHash)]),
            ]

        case let .deletePushSubscription(id):
            return [S("DELETE FROM push_outbox WHERE subscription_id = ?", [.text(id)]),
                    S("DELETE FROM push_subscriptions WHERE id = ?", [.text(id)])]

        case let .enqueueOutbox(entry):
            return [S("""
                INSERT INTO push_outbox (id, kind, subscription_id, endpoint, p256dh, auth, payload, urgency, topic,
                                         ttl, alarm_id, created_at, next_attempt_at, attempts)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.text(entry.id), .text(entry.kind.rawValue), .init(text: entry.subscriptionId), .text(entry.endpoint),
                 .text(entry.p256dh), .text(entry.auth), .bytes(entry.payload), .text(entry.urgency), .init(text: entry.topic),
                 .int(Int64(entry.ttl)), .init(text: entry.alarmId), .int(entry.createdAt), .int(entry.nextAttemptAt),
                 .int(Int64(entry.attempts))])]

        case let .cancelAlarmPushes(alarmId):
            return [S("DELETE FROM push_outbox WHERE alarm_id = ? AND kind = ?",
                      [.text(alarmId), .text(OutboxEntry.Kind.webPush.rawValue)])]

        case let .saveShare(share):
            return [S("INSERT INTO shares (id, session_id, owner, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                      [.text(share.id), .text(share.sessionId), .text(share.owner), .text(share.tokenHash), .int(share.createdAt),
                       .int(share.expiresAt)])]

        case let .removeShare(id):
            // Deleted, not marked: an ended link is of no use to anyone, and its hash need not be kept.
            return [S("DELETE FROM shares WHERE id = ?", [.text(id)])]

        case let .setStandingShare(owner, friends):
            return [S("DELETE FROM standing_shares WHERE owner = ?", [.text(owner)])]
                + S.insert(into: "standing_shares", ["owner", "friend", "position"],
                           rows: Self.unique(friends).enumerated().map { [.text(owner), .text($1), .int(Int64($0))] })

        case let .savePause(pause):
            return [S("""
                INSERT INTO location_pauses (owner, from_user, until) VALUES (?, ?, ?)
                ON CONFLICT (owner, from_user) DO UPDATE SET until = excluded.until
                """, [.text(pause.owner), .text(pause.key), .init(pause.until)])]

        case let .removePause(owner, from):
            return [S("DELETE FROM location_pauses WHERE owner = ? AND from_user = ?",
                      [.text(owner), .text(from ?? LocationPause.everyone)])]

        case let .saveMeeting(meeting):
            // The meeting's own row is written once; its invitees are replaced.
            return [
                S("""
                    INSERT INTO meetings (id, owner, name, lat, lon, time, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO NOTHING
                    """,
                  [.text(meeting.id), .text(meeting.owner), .freeText(meeting.name), .double(meeting.lat), .double(meeting.lon),
                   .int(meeting.time), .int(meeting.createdAt)]),
                S("DELETE FROM meeting_invitees WHERE meeting_id = ?", [.text(meeting.id)]),
            ] + S.insert(into: "meeting_invitees", ["meeting_id", "username", "position", "response", "queued_at", "delivered_at"],
                         rows: meeting.invitees.enumerated().map { position, invitee in
                             [.text(meeting.id), .text(invitee.username), .int(Int64(position)), .text(invitee.response.rawValue),
                              .int(invitee.queuedAt), .init(invitee.deliveredAt)]
                         })

        case let .removeMeeting(id):
            return [S("DELETE FROM meetings WHERE id = ?", [.text(id)])]

        case let .saveMessage(message):
            // A message is written once; saving it again changes only when it was delivered.
            return [S("""
                INSERT INTO messages (id, sender, recipient, text, queued_at, delivered_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET delivered_at = excluded.delivered_at
                """,
                [.text(message.id), .text(message.from), .text(message.to), .freeText(message.text), .int(message.queuedAt),
                 .init(message.deliveredAt)])]

        case let .removeMessage(id):
            return [S("DELETE FROM messages WHERE id = ?", [.text(id)])]
        }
    }

    /// The first string of the change that would be stored as TEXT and contains NUL: a store refuses the
    /// change's whole batch (`StoredStatement.textWithNUL`).
    public var keyWithNUL: String? {
        statements(at: 0).lazy.compactMap(\.textWithNUL).first
    }

    private static func statements(saving session: FollowSession) -> [StoredStatement] {
        let destination = session.destination
        return [
            StoredStatement("""
                INSERT INTO sessions (id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius,
                                      expires_at, lost_since)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    owner = excluded.owner, note = excluded.note, started_at = excluded.started_at,
                    check_in_by = excluded.check_in_by, dest_lat = excluded.dest_lat, dest_lon = excluded.dest_lon,
                    dest_radius = excluded.dest_radius, expires_at = excluded.expires_at, lost_since = excluded.lost_since
                """,
                [.text(session.id), .text(session.owner), .init(freeText: session.note), .int(session.startedAt),
                 .init(session.checkInBy), .init(destination?.lat), .init(destination?.lon), .init(destination?.radius),
                 .init(session.expiresAt), .init(session.lostSince)]),
            StoredStatement("DELETE FROM session_invitees WHERE session_id = ?", [.text(session.id)]),
        ] + StoredStatement.insert(
            into: "session_invitees", ["session_id", "username", "state", "position"],
            rows: session.invitees.enumerated().compactMap { position, invitee in
                session.state(of: invitee).map { [.text(session.id), .text(invitee), .text($0.rawValue), .int(Int64(position))] }
            })
    }

    /// The alarm's row, then its recipients: each recipient once, in order, keeping the acknowledgement time
    /// already stored for it (`Alarm` keeps the order of acknowledgements, not their times) without reading
    /// it first. The rows stored before are marked (position -1), the recipients written over them, and the
    /// marked rows that remain (recipients no longer there) deleted.
    private static func statements(saving alarm: Alarm, at now: Int64) -> [StoredStatement] {
        let position = alarm.position
        return [
            StoredStatement("""
                INSERT INTO alarms (id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto,
                                    repeats, next_repeat_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    owner = excluded.owner, text = excluded.text,
                    lat = excluded.lat, lon = excluded.lon, acc = excluded.acc, alt = excluded.alt,
                    spd = excluded.spd, hdg = excluded.hdg, batt = excluded.batt, pos_ts = excluded.pos_ts,
                    created_at = excluded.created_at, auto = excluded.auto,
                    repeats = excluded.repeats, next_repeat_at = excluded.next_repeat_at
                """,
                [.text(alarm.id), .text(alarm.owner), .freeText(alarm.text), .init(position?.lat), .init(position?.lon),
                 .init(position?.acc), .init(position?.alt), .init(position?.spd), .init(position?.hdg), .init(position?.batt),
                 .init(position?.ts), .int(alarm.createdAt), .bool(alarm.auto), .int(Int64(alarm.repeats)),
                 .init(alarm.nextRepeatAt)]),
            StoredStatement("UPDATE alarm_recipients SET position = -1 WHERE alarm_id = ?", [.text(alarm.id)]),
        ] + StoredStatement.insert(
            into: "alarm_recipients", ["alarm_id", "username", "position", "delivered_at", "acked_at", "ack_order"],
            rows: alarm.storedRecipients(now: now).map { recipient in
                [.text(alarm.id), .text(recipient.username), .int(recipient.position), .init(recipient.deliveredAt),
                 .init(recipient.ackedAt), .init(recipient.ackOrder)]
            },
            suffix: """
                ON CONFLICT (alarm_id, username) DO UPDATE SET
                    position = excluded.position, delivered_at = excluded.delivered_at, ack_order = excluded.ack_order,
                    acked_at = CASE WHEN excluded.ack_order IS NULL THEN NULL
                                    ELSE COALESCE(alarm_recipients.acked_at, excluded.acked_at) END
                """
        ) + [StoredStatement("DELETE FROM alarm_recipients WHERE alarm_id = ? AND position = -1", [.text(alarm.id)])]
    }
}
