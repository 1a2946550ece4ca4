import HomewardProtocol

/// What a load reads, once for both stores: the SELECTs (`StoredState.Read`) and what their rows mean
/// (`init(rows:)`). The SQLite store runs each read with GRDB, the PostgreSQL store with postgres-nio in one
/// REPEATABLE READ transaction; both decode their rows through `StoredRow`.
extension StoredState {
    /// One SELECT of a load. The rows of each come in a fixed order, so both stores load the same state.
    public enum Read: CaseIterable, Sendable {
        case users, tokens, friendships, friendRequests, blocks, alarmContacts
        case sessions, sessionInvitees, alarmRecipients, alarms, shares, pushSubscriptions
        case standingShares, pauses, meetingInvitees, meetings, messages

        public var sql: String {
            switch self {
            case .users: "SELECT username, name, last_seen FROM users ORDER BY created_at, username"
            case .tokens: "SELECT hash, username, created_at, COALESCE(last_used, created_at) FROM tokens"
            case .friendships: "SELECT user_a, user_b FROM friendships ORDER BY created_at, user_a, user_b"
            case .friendRequests: "SELECT from_user, to_user FROM friend_requests ORDER BY created_at, from_user, to_user"
            case .blocks: "SELECT blocker, blocked FROM blocks ORDER BY blocker, blocked"
            case .alarmContacts: "SELECT owner, contact FROM alarm_contacts ORDER BY owner, position"
            case .sessions: """
                SELECT id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius, expires_at, lost_since
                FROM sessions WHERE ended_at IS NULL ORDER BY started_at, id
                """
            case .sessionInvitees: """
                SELECT i.session_id, i.username, i.state FROM session_invitees i
                JOIN sessions s ON s.id = i.session_id
                WHERE s.ended_at IS NULL
                ORDER BY i.session_id, i.position
                """
            case .alarmRecipients: """
                SELECT r.alarm_id, r.username, r.delivered_at, r.ack_order FROM alarm_recipients r
                JOIN alarms a ON a.id = r.alarm_id
                WHERE a.ended_at IS NULL
                ORDER BY r.alarm_id, r.position
                """
            case .alarms: """
                SELECT id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto, repeats, next_repeat_at
                FROM alarms WHERE ended_at IS NULL ORDER BY created_at, id
                """
            case .shares: "SELECT id, session_id, owner, token_hash, created_at, expires_at FROM shares ORDER BY created_at, id"
            case .pushSubscriptions: """
                SELECT id, username, endpoint, p256dh, auth, created_at, token_hash FROM push_subscriptions ORDER BY created_at, id
                """
            case .standingShares: "SELECT owner, friend FROM standing_shares ORDER BY owner, position"
            case .pauses: "SELECT owner, from_user, until FROM location_pauses ORDER BY owner, from_user"
            case .meetingInvitees: """
                SELECT meeting_id, username, response, queued_at, delivered_at FROM meeting_invitees ORDER BY meeting_id, position
                """
            case .meetings: "SELECT id, owner, name, lat, lon, time, created_at FROM meetings ORDER BY created_at, id"
            case .messages: "SELECT id, sender, recipient, text, queued_at, delivered_at FROM messages ORDER BY queued_at, id"
            }
        }

        /// The read's statement: every row (`users` nil, a whole load), or only the rows that concern any of
        /// `users` (a slice, `RelayStore.loadSlice`), in the same columns and order. The list is one argument,
        /// read as a table (`StoredValue.textList`) wherever the SQL says `(SELECT value FROM ?)`.
        public func statement(concerning users: [String]?) -> StoredStatement {
            guard let users else { return StoredStatement(sql, []) }
            let sql = sliceSQL
            return StoredStatement(sql, Array(repeating: .textList(users), count: sql.utf8.filter { $0 == UInt8(ascii: "?") }.count))
        }

        /// The read's statement in a load of what a cache of connected users starts from (`RelayStore.loadActive`, the
        /// rows `StoredState.active()` selects), in the same columns and order; nil for a read that brings none of it
        /// (users, tokens, relations, contacts, subscriptions, standing shares, messages), which the store skips.
        /// Each starts from an index that holds only active rows (an active session or alarm: their owners' partial
        /// indexes; a pause with an end), so its cost follows what is under way, not how many users or ended walks
        /// the store holds. Invitees, recipients and links are looked up per active session or alarm: `CROSS JOIN`
        /// makes SQLite keep that order (the whole load's join scans every invitee); PostgreSQL plans it as a join.
        public var activeStatement: StoredStatement? {
            switch self {
            case .users, .tokens, .friendships, .friendRequests, .blocks, .alarmContacts, .pushSubscriptions, .standingShares,
                 .messages:
                return nil
            case .sessions, .alarms, .meetingInvitees, .meetings:
                return StoredStatement(sql, [])
            case .sessionInvitees:
                return StoredStatement("""
                    SELECT i.session_id, i.username, i.state FROM sessions s CROSS JOIN session_invitees i
                    WHERE i.session_id = s.id AND s.ended_at IS NULL
                    ORDER BY i.session_id, i.position
                    """, [])
            case .alarmRecipients:
                return StoredStatement("""
                    SELECT r.alarm_id, r.username, r.delivered_at, r.ack_order FROM alarms a CROSS JOIN alarm_recipients r
                    WHERE r.alarm_id = a.id AND a.ended_at IS NULL
                    ORDER BY r.alarm_id, r.position
                    """, [])
            case .shares:
                return StoredStatement("""
                    SELECT sh.id, sh.session_id, sh.owner, sh.token_hash, sh.created_at, sh.expires_at FROM sessions s CROSS JOIN shares sh
                    WHERE sh.session_id = s.id AND s.ended_at IS NULL
                    ORDER BY sh.created_at, sh.id
                    """, [])
            case .pauses:
                return StoredStatement(
                    "SELECT owner, from_user, until FROM location_pauses WHERE until IS NOT NULL ORDER BY owner, from_user", [])
            }
        }

        /// `sql` limited to the rows that concern the users of the list: a relation with either of its users
        /// among them, a session, an alarm or a meeting point whole (and an active session's links) when one of
        /// them owns it or is invited to it, an owner's whole list of standing shares when one of them owns it or is on it.
        /// Relations go in a UNION, one SELECT per side, so that each side reads its own index.
        private var sliceSQL: String {
            let users = "(SELECT value FROM ?)"
            let sessions = """
                (SELECT id FROM sessions WHERE owner IN \(users) AND ended_at IS NULL
                 UNION SELECT session_id FROM session_invitees WHERE username IN \(users))
                """
            let alarms = """
                (SELECT id FROM alarms WHERE owner IN \(users) AND ended_at IS NULL
                 UNION SELECT alarm_id FROM alarm_recipients WHERE username IN \(users))
                """
            let meetings = """
                (SELECT id FROM meetings WHERE owner IN \(users) UNION SELECT meeting_id FROM meeting_invitees WHERE username IN \(users))
                """
            /// Both sides of a relation between two users, with `order`'s columns.
            func either(_ columns: String, from table: String, _ a: String, _ b: String, order: String) -> String {
                """
                SELECT \(columns) FROM \(table) WHERE \(a) IN \(users)
                UNION SELECT \(columns) FROM \(table) WHERE \(b) IN \(users)
                ORDER BY \(order)
                """
            }
            switch self {
            case .users: return "SELECT username, name, last_seen FROM users WHERE username IN \(users) ORDER BY created_at, username"
            case .tokens: return "SELECT hash, username, created_at, COALESCE(last_used, created_at) FROM tokens WHERE username IN \(users)"
            case .friendships:
                return either("user_a, user_b, created_at", from: "friendships", "user_a", "user_b", order: "created_at, user_a, user_b")
            case .friendRequests:
                return either("from_user, to_user, created_at", from: "friend_requests", "from_user", "to_user",
                              order: "created_at, from_user, to_user")
            case .blocks: return either("blocker, blocked", from: "blocks", "blocker", "blocked", order: "blocker, blocked")
            case .alarmContacts: return "SELECT owner, contact FROM alarm_contacts WHERE owner IN \(users) ORDER BY owner, position"
            case .sessions: return """
                SELECT id, owner, note, started_at, check_in_by, dest_lat, dest_lon, dest_radius, expires_at, lost_since
                FROM sessions WHERE ended_at IS NULL AND id IN \(sessions) ORDER BY started_at, id
                """
            case .sessionInvitees: return """
                SELECT i.session_id, i.username, i.state FROM session_invitees i
                JOIN sessions s ON s.id = i.session_id
                WHERE s.ended_at IS NULL AND i.session_id IN \(sessions)
                ORDER BY i.session_id, i.position
                """
            case .alarmRecipients: return """
                SELECT r.alarm_id, r.username, r.delivered_at, r.ack_order FROM alarm_recipients r
                JOIN alarms a ON a.id = r.alarm_id
                WHERE a.ended_at IS NULL AND r.alarm_id IN \(alarms)
                ORDER BY r.alarm_id, r.position
                """
            case .alarms: return """
                SELECT id, owner, text, lat, lon, acc, alt, spd, hdg, batt, pos_ts, created_at, auto, repeats, next_repeat_at
                FROM alarms WHERE ended_at IS NULL AND id IN \(alarms) ORDER BY created_at, id
                """
            case .shares: return """
                SELECT id, session_id, owner, token_hash, created_at, expires_at FROM shares
                WHERE session_id IN (SELECT id FROM sessions WHERE ended_at IS NULL AND id IN \(sessions))
                ORDER BY created_at, id
                """
            case .pushSubscriptions: return """
                SELECT id, username, endpoint, p256dh, auth, created_at, token_hash FROM push_subscriptions
                WHERE username IN \(users) ORDER BY created_at, id
                """
            case .standingShares: return """
                SELECT owner, friend FROM standing_shares
                WHERE owner IN (SELECT value FROM ? UNION SELECT owner FROM standing_shares WHERE friend IN \(users))
                ORDER BY owner, position
                """
            case .pauses: return either("owner, from_user, until", from: "location_pauses", "owner", "from_user", order: "owner, from_user")
            case .meetingInvitees: return """
                SELECT meeting_id, username, response, queued_at, delivered_at FROM meeting_invitees
                WHERE meeting_id IN \(meetings) ORDER BY meeting_id, position
                """
            case .meetings: return """
                SELECT id, owner, name, lat, lon, time, created_at FROM meetings WHERE id IN \(meetings) ORDER BY created_at, id
                """
            case .messages:
                return either("id, sender, recipient, text, queued_at, delivered_at", from: "messages", "sender", "recipient",
                              order: "queued_at, id")
            }
        }
    }

    /// Everything the relay keeps in memory, from the rows of each `Read` (`rows` runs one; the caller makes
    /// them one consistent read).
    public init<Row: StoredRow>(rows: (Read) throws -> [Row]) throws {
        self.init()
        for row in try rows(.users) {
            let username = try row.text(0)
            users.append(UserProfile(username: username, name: try row.freeText(1)))
            if let seen = try row.optionalInt(2) { lastSeen[username] = seen }
        }
        tokens = try rows(.tokens).map {
            IssuedToken(hash: try $0.text(0), username: try $0.text(1), createdAt: try $0.int(2), lastUsed: try $0.int(3))
        }
        friendships = try rows(.friendships).map { (try $0.text(0), try $0.text(1)) }
        friendRequests = try rows(.friendRequests).map { (from: try $0.text(0), to: try $0.text(1)) }
        blocks = try rows(.blocks).map { (blocker: try $0.text(0), blocked: try $0.text(1)) }
        for row in try rows(.alarmContacts) { alarmContacts[try row.text(0), default: []].append(try row.text(1)) }
        sessions = try Self.activeSessions(rows)
        alarms = try Self.activeAlarms(rows)
        shares = try rows(.shares).map {
            ShareLink(id: try $0.text(0), sessionId: try $0.text(1), owner: try $0.text(2), tokenHash: try $0.text(3),
                      createdAt: try $0.int(4), expiresAt: try $0.int(5))
        }
        pushSubscriptions = try rows(.pushSubscriptions).map {
            PushSubscription(id: try $0.text(0), username: try $0.text(1), endpoint: try $0.text(2), p256dh: try $0.text(3),
                             auth: try $0.text(4), createdAt: try $0.int(5), tokenHash: try $0.optionalText(6))
        }
        try loadFriendsMap(rows)
    }

    /// Standing shares, pauses, meeting points and unread messages.
    private mutating func loadFriendsMap<Row: StoredRow>(_ rows: (Read) throws -> [Row]) throws {
        for row in try rows(.standingShares) { standingShares[try row.text(0), default: []].append(try row.text(1)) }
        pauses = try rows(.pauses).map {
            let from = try $0.text(1)
            return LocationPause(owner: try $0.text(0), from: from.isEmpty ? nil : from, until: try $0.optionalInt(2))
        }
        var invitees: [String: [MeetingInvitee]] = [:]
        for row in try rows(.meetingInvitees) {
            let raw = try row.text(2)
            guard let response = MeetingInvitee.Response(rawValue: raw) else { throw Row.unreadable("unknown meeting response \(raw)") }
            invitees[try row.text(0), default: []].append(
                MeetingInvitee(username: try row.text(1), response: response, queuedAt: try row.int(3), deliveredAt: try row.optionalInt(4)))
        }
        meetings = try rows(.meetings).map {
            let id = try $0.text(0)
            return MeetingPoint(id: id, owner: try $0.text(1), name: try $0.freeText(2), lat: try $0.double(3), lon: try $0.double(4),
                                time: try $0.int(5), createdAt: try $0.int(6), invitees: invitees[id] ?? [])
        }
        messages = try rows(.messages).map {
            MessageInfo(id: try $0.text(0), from: try $0.text(1), to: try $0.text(2), text: try $0.freeText(3),
                        queuedAt: try $0.int(4), deliveredAt: try $0.optionalInt(5))
        }
    }

    private static func activeSessions<Row: StoredRow>(_ rows: (Read) throws -> [Row]) throws -> [FollowSession] {
        var sessions: [FollowSession] = []
        var index: [String: Int] = [:]
        for row in try rows(.sessions) {
            let id = try row.text(0)
            index[id] = sessions.count
            var session = FollowSession(id: id, owner: try row.text(1), note: try row.optionalFreeText(2), startedAt: try row.int(3))
            session.checkInBy = try row.optionalInt(4)
            if let lat = try row.optionalDouble(5), let lon = try row.optionalDouble(6), let radius = try row.optionalDouble(7) {
                session.destination = Destination(lat: lat, lon: lon, radius: radius)
            }
            session.expiresAt = try row.optionalInt(8)
            session.lostSince = try row.optionalInt(9)
            sessions.append(session)
        }
        for row in try rows(.sessionInvitees) {
            let id = try row.text(0)
            guard let at = index[id] else { continue }
            let raw = try row.text(2)
            guard let state = FollowSession.InviteState(rawValue: raw) else {
                throw Row.unreadable("unknown invite state \(raw) in session \(id)")
            }
            sessions[at].set(state, for: try row.text(1))
        }
        return sessions
    }

    /// An active alarm's recipients as stored: in order, the acknowledged ones with their order, delivery times.
    private struct AlarmRecipients {
        var ordered: [String] = []
        var acked: [(order: Int64, username: String)] = []
        var deliveredAt: [String: Int64] = [:]
    }

    private static func activeAlarms<Row: StoredRow>(_ rows: (Read) throws -> [Row]) throws -> [Alarm] {
        var recipients: [String: AlarmRecipients] = [:]
        for row in try rows(.alarmRecipients) {
            let id = try row.text(0)
            let username = try row.text(1)
            recipients[id, default: AlarmRecipients()].ordered.append(username)
            if let delivered = try row.optionalInt(2) { recipients[id]!.deliveredAt[username] = delivered }
            if let order = try row.optionalInt(3) { recipients[id]!.acked.append((order, username)) }
        }

        var alarms: [Alarm] = []
        for row in try rows(.alarms) {
            let id = try row.text(0)
            var position: Position?
            // An alarm's position is stored whole or not at all (`StoreChange.statements`).
            if let lat = try row.optionalDouble(3), let lon = try row.optionalDouble(4), let ts = try row.optionalInt(10) {
                position = Position(lat: lat, lon: lon, acc: try row.optionalDouble(5), alt: try row.optionalDouble(6),
                                    spd: try row.optionalDouble(7), hdg: try row.optionalDouble(8), batt: try row.optionalDouble(9), ts: ts)
            }
            let stored = recipients[id] ?? AlarmRecipients()
            var alarm = Alarm(id: id, owner: try row.text(1), text: try row.freeText(2), position: position,
                              createdAt: try row.int(11), auto: try row.bool(12), recipients: stored.ordered)
            alarm.restore(acked: stored.acked.sorted { $0.order < $1.order }.map(\.username))
            alarm.deliveredAt = stored.deliveredAt
            alarm.repeats = Int(try row.int(13))
            alarm.nextRepeatAt = try row.optionalInt(14)
            alarms.append(alarm)
        }
        return alarms
    }
}
