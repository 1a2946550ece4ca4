import GRDB
import HomewardCore
import HomewardProtocol

extension StoredState {
    /// Reads everything the relay keeps in memory: users, friends, contacts and the active sessions and alarms.
    init(db: Database) throws {
        self.init()

        for row in try Row.fetchAll(db, sql: "SELECT username, name, last_seen FROM users ORDER BY created_at, username") {
            let username: String = row["username"]
            users.append(UserProfile(username: username, name: row["name"]))
            if let seen: Int64 = row["last_seen"] { lastSeen[username] = seen }
        }

        for row in try Row.fetchAll(
            db, sql: "SELECT hash, username, created_at, COALESCE(last_used, created_at) AS last_used FROM tokens")
        {
            tokens.append(IssuedToken(hash: row["hash"], username: row["username"], createdAt: row["created_at"],
                                      lastUsed: row["last_used"]))
        }

        for row in try Row.fetchAll(db, sql: "SELECT user_a, user_b FROM friendships ORDER BY created_at, user_a, user_b") {
            friendships.append((row["user_a"], row["user_b"]))
        }

        for row in try Row.fetchAll(
            db, sql: "SELECT from_user, to_user FROM friend_requests ORDER BY created_at, from_user, to_user")
        {
            friendRequests.append((from: row["from_user"], to: row["to_user"]))
        }

        for row in try Row.fetchAll(db, sql: "SELECT blocker, blocked FROM blocks ORDER BY blocker, blocked") {
            blocks.append((blocker: row["blocker"], blocked: row["blocked"]))
        }

        for row in try Row.fetchAll(db, sql: "SELECT owner, contact FROM alarm_contacts ORDER BY owner, position") {
            alarmContacts[row["owner"], default: []].append(row["contact"])
        }

        sessions = try Self.activeSessions(db)
        alarms = try Self.activeAlarms(db)

        for row in try Row.fetchAll(
            db, sql: "SELECT id, session_id, owner, token_hash, created_at, expires_at FROM shares ORDER BY created_at, id")
        {
            shares.append(ShareLink(id: row["id"], sessionId: row["session_id"], owner: row["owner"], tokenHash: row["token_hash"],
                                    createdAt: row["created_at"], expiresAt: row["expires_at"]))
        }

        for row in try Row.fetchAll(
            db, sql: "SELECT id, username, endpoint, p256dh, auth, created_at, token_hash FROM push_subscriptions ORDER BY created_at, id")
        {
            pushSubscriptions.append(PushSubscription(id: row["id"], username: row["username"], endpoint: row["endpoint"],
                                                      p256dh: row["p256dh"], auth: row["auth"], createdAt: row["created_at"],
                                                      tokenHash: row["token_hash"]))
        }
        try loadFriendsMap(db)
    }

    /// Issue 15: standing shares, pauses, meeting points and unread messages.
    private mutating func loadFriendsMap(_ db: Database) throws {
        for row in try Row.fetchAll(db, sql: "SELECT owner, friend FROM standing_shares ORDER BY owner, position") {
            standingShares[row["owner"], default: []].append(row["friend"])
        }
        for row in try Row.fetchAll(db, sql: "SELECT owner, from_user, until FROM location_pauses ORDER BY owner, from_user") {
            let from: String = row["from_user"]
            pauses.append(LocationPause(owner: row["owner"], from: from.isEmpty ? nil : from, until: row["until"]))
        }
        var invitees: [String: [MeetingInvitee]] = [:]
        for row in try Row.fetchAll(db, sql: """
            SELECT meeting_id, username, response, queued_at, delivered_at FROM meeting_invitees ORDER BY meeting_id, position
            """) {
            let raw: String = row["response"]
            guard let response = MeetingInvitee.Response(rawValue: raw) else {
                throw DatabaseError(message: "unknown meeting response \(raw)")
            }
            invitees[row["meeting_id"], default: []].append(
                MeetingInvitee(username: row["username"], response: response, queuedAt: row["queued_at"], deliveredAt: row["delivered_at"]))
        }
        for row in try Row.fetchAll(db, sql: "SELECT id, owner, name, lat, lon, time, created_at FROM meetings ORDER BY created_at, id") {
            let id: String = row["id"]
            meetings.append(MeetingPoint(id: id, owner: row["owner"], name: row["name"], lat: row["lat"], lon: row["lon"],
                                         time: row["time"], createdAt: row["created_at"], invitees: invitees[id] ?? []))
        }
        for row in try Row.fetchAll(db, sql: """
            SELECT id, sender, recipient, text, queued_at, delivered_at FROM messages ORDER BY queued_at, id
            """) {
            messages.append(MessageInfo(id: row["id"], from: row["sender"], to: row["recipient"], text: row["text"],
                                        queuedAt: row["queued_at"], deliveredAt: row["delivered_at"]))
        }
    }

    private static func activeSessions(_ db: Database) throws -> [FollowSession] {
        var sessions: [FollowSession] = []
        var index: [String: Int] = [:]
        for row in try Row.fetchAll(
            db, sql: """
                SELECT id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius, expires_at, lost_since
                FROM sessions WHERE ended_at IS NULL ORDER BY started_at, id
                """)
        {
            let id: String = row["id"]
            index[id] = sessions.count
            var session = FollowSession(id: id, owner: row["owner"], note: row["note"], startedAt: row["started_at"])
            session.checkInBy = row["check_in_by"]
            if let lat: Double = row["dest_lat"], let lon: Double = row["dest_lon"], let radius: Double = row["dest_radius"] {
                session.destination = Destination(lat: lat, lon: lon, radius: radius)
            }
            session.expiresAt = row["expires_at"]
            session.lostSince = row["lost_since"]
            sessions.append(session)
        }
        let invitees = try Row.fetchAll(db, sql: """
            SELECT i.session_id, i.username, i.state FROM session_invitees i
            JOIN sessions s ON s.id = i.session_id
            WHERE s.ended_at IS NULL
            ORDER BY i.session_id, i.position
            """)
        for row in invitees {
            guard let at = index[row["session_id"]] else { continue }
            let raw: String = row["state"]
            guard let state = FollowSession.InviteState(rawValue: raw) else {
                throw DatabaseError(message: "unknown invite state \(raw) in session \(sessions[at].id)")
            }
            sessions[at].set(state, for: row["username"])
        }
        return sessions
    }

    private static func activeAlarms(_ db: Database) throws -> [Alarm] {
        struct Recipients {
            var ordered: [String] = []
            var acked: [(order: Int64, username: String)] = []
            var deliveredAt: [String: Int64] = [:]
        }
        var recipients: [String: Recipients] = [:]
        let recipientRows = try Row.fetchAll(db, sql: """
            SELECT r.alarm_id, r.username, r.delivered_at, r.ack_order FROM alarm_recipients r
            JOIN alarms a ON a.id = r.alarm_id
            WHERE a.ended_at IS NULL
            ORDER BY r.alarm_id, r.position
            """)
        for row in recipientRows {
            let id: String = row["alarm_id"]
            let username: String = row["username"]
            recipients[id, default: Recipients()].ordered.append(username)
            if let order: Int64 = row["ack_order"] { recipients[id]!.acked.append((order, username)) }
            if let delivered: Int64 = row["delivered_at"] { recipients[id]!.deliveredAt[username] = delivered }
        }

        var alarms: [Alarm] = []
        for row in try Row.fetchAll(db, sql: """
            SELECT id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto, repeats, next_repeat_at
            FROM alarms WHERE ended_at IS NULL ORDER BY created_at, id
            """)
        {
            let id: String = row["id"]
            var position: Position?
            if let lat: Double = row["lat"], let lon: Double = row["lon"] {
                position = Position(lat: lat, lon: lon, acc: row["acc"], alt: row["alt"], spd: row["spd"],
                                    hdg: row["hdg"], batt: row["batt"], ts: row["pos_ts"])
            }
            let stored = recipients[id] ?? Recipients()
            var alarm = Alarm(id: id, owner: row["owner"], text: row["text"], position: position,
                              createdAt: row["created_at"], auto: row["auto"], recipients: stored.ordered)
            alarm.restore(acked: stored.acked.sorted { $0.order < $1.order }.map(\.username))
            alarm.deliveredAt = stored.deliveredAt
            alarm.repeats = row["repeats"]
            alarm.nextRepeatAt = row["next_repeat_at"]
            alarms.append(alarm)
        }
        return alarms
    }
}
