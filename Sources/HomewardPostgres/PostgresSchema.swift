import Logging
import PostgresNIO

/// The PostgreSQL schema, built by versioned migrations recorded in `schema_migrations`. Never edit a
/// registered migration: add a new one.
///
/// The same logical schema as HomewardStorage's `Schema` (its v1 to v4 in one step), with these choices:
/// - Keys (usernames, ids, token hashes) are `TEXT COLLATE "C"`: compared and ordered by code point, as
///   Swift compares them (a friendship pair is stored smaller username first) and as SQLite does.
/// - Free text a user wrote (display names, notes, alarm texts, end reasons) is `BYTEA` holding its
///   UTF-8: `TEXT` cannot hold NUL, and a message must be stored exactly as it was written.
/// - Integers (times in ms, counts, positions) are `BIGINT`; coordinates `DOUBLE PRECISION`.
enum PostgresSchema {
    struct Migration {
        let version: String
        let statements: [String]
    }

    /// Any constant that other applications on the same database are unlikely to use: relays starting
    /// together take this advisory lock so that only one of them migrates.
    /// The SQLSTATE with which `homeward_write` refuses a write whose versions were not the writer's.
    static let cacheBehindState = "HWVER"

    static let migrationLock: Int64 = 0x686f_6d65_7761_7264  // "homeward"

    static let migrations: [Migration] = [
        Migration(version: "v1", statements: [
            """
            CREATE TABLE users (
                username TEXT COLLATE "C" PRIMARY KEY,
                name BYTEA NOT NULL,
                password_hash TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                last_seen BIGINT
            )
            """,
            """
            CREATE TABLE tokens (
                hash TEXT COLLATE "C" PRIMARY KEY,
                username TEXT COLLATE "C" NOT NULL REFERENCES users(username) ON DELETE CASCADE,
                created_at BIGINT NOT NULL,
                last_used BIGINT NOT NULL
            )
            """,
            "CREATE INDEX tokens_by_username ON tokens(username)",
            """
            CREATE TABLE friend_requests (
                from_user TEXT COLLATE "C" NOT NULL,
                to_user TEXT COLLATE "C" NOT NULL,
                created_at BIGINT NOT NULL,
                PRIMARY KEY (from_user, to_user)
            )
            """,
            "CREATE INDEX friend_requests_by_recipient ON friend_requests(to_user)",
            // Each pair is stored once, smaller username first.
            """
            CREATE TABLE friendships (
                user_a TEXT COLLATE "C" NOT NULL,
                user_b TEXT COLLATE "C" NOT NULL,
                created_at BIGINT NOT NULL,
                PRIMARY KEY (user_a, user_b),
                CHECK (user_a < user_b)
            )
            """,
            "CREATE INDEX friendships_by_user_b ON friendships(user_b)",
            """
            CREATE TABLE blocks (
                blocker TEXT COLLATE "C" NOT NULL,
                blocked TEXT COLLATE "C" NOT NULL,
                created_at BIGINT NOT NULL,
                PRIMARY KEY (blocker, blocked)
            )
            """,
            """
            CREATE TABLE alarm_contacts (
                owner TEXT COLLATE "C" NOT NULL,
                contact TEXT COLLATE "C" NOT NULL,
                position BIGINT NOT NULL,
                PRIMARY KEY (owner, contact)
            )
            """,
            """
            CREATE TABLE sessions (
                id TEXT COLLATE "C" PRIMARY KEY,
                owner TEXT COLLATE "C" NOT NULL,
                note BYTEA,
                started_at BIGINT NOT NULL,
                ended_at BIGINT,
                end_reason BYTEA,
                check_in_by BIGINT,
                dest_lat DOUBLE PRECISION,
                dest_lon DOUBLE PRECISION,
                dest_radius DOUBLE PRECISION,
                expires_at BIGINT,
                lost_since BIGINT
            )
            """,
            "CREATE UNIQUE INDEX sessions_active_by_owner ON sessions(owner) WHERE ended_at IS NULL",
            """
            CREATE TABLE session_invitees (
                session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                username TEXT COLLATE "C" NOT NULL,
                state TEXT NOT NULL,
                position BIGINT NOT NULL,
                PRIMARY KEY (session_id, username)
            )
            """,
            "CREATE INDEX session_invitees_by_username ON session_invitees(username)",
            // The position columns are all NULL when the alarm has no position.
            """
            CREATE TABLE alarms (
                id TEXT COLLATE "C" PRIMARY KEY,
                owner TEXT COLLATE "C" NOT NULL,
                text BYTEA NOT NULL,
                lat DOUBLE PRECISION,
                lon DOUBLE PRECISION,
                acc DOUBLE PRECISION,
                alt DOUBLE PRECISION,
                spd DOUBLE PRECISION,
                hdg DOUBLE PRECISION,
                batt DOUBLE PRECISION,
                pos_ts BIGINT,
                created_at BIGINT NOT NULL,
                auto BOOLEAN NOT NULL DEFAULT FALSE,
                ended_at BIGINT,
                end_reason BYTEA,
                repeats BIGINT NOT NULL DEFAULT 0,
                next_repeat_at BIGINT,
                CHECK ((lat IS NULL) = (lon IS NULL) AND (lat IS NULL) = (pos_ts IS NULL))
            )
            """,
            "CREATE INDEX alarms_active_by_owner ON alarms(owner) WHERE ended_at IS NULL",
            """
            CREATE TABLE alarm_recipients (
                alarm_id TEXT COLLATE "C" NOT NULL REFERENCES alarms(id) ON DELETE CASCADE,
                username TEXT COLLATE "C" NOT NULL,
                position BIGINT NOT NULL,
                delivered_at BIGINT,
                acked_at BIGINT,
                ack_order BIGINT,
                PRIMARY KEY (alarm_id, username)
            )
            """,
            "CREATE INDEX alarm_recipients_by_username ON alarm_recipients(username)",
        ]),
        // Protocol 1.1 share links (SQLite's v5-shares): only the SHA-256 of each token is kept.
        Migration(version: "v2-shares", statements: [
            """
            CREATE TABLE shares (
                id TEXT COLLATE "C" PRIMARY KEY,
                session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                owner TEXT COLLATE "C" NOT NULL,
                token_hash TEXT COLLATE "C" NOT NULL UNIQUE,
                created_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX shares_by_session ON shares(session_id)",
        ]),
        // Issue 14: Web Push subscriptions and the durable outbox (SQLite's v6-push). Endpoints and keys are
        // checked when subscribing (no control characters, base64url): TEXT compared by code point, like keys.
        Migration(version: "v3-push", statements: [
            """
            CREATE TABLE push_subscriptions (
                id TEXT COLLATE "C" PRIMARY KEY,
                username TEXT COLLATE "C" NOT NULL,
                endpoint TEXT COLLATE "C" NOT NULL,
                p256dh TEXT COLLATE "C" NOT NULL,
                auth TEXT COLLATE "C" NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX push_subscriptions_by_username ON push_subscriptions(username)",
            """
            CREATE TABLE push_outbox (
                id TEXT COLLATE "C" PRIMARY KEY,
                kind TEXT COLLATE "C" NOT NULL,
                subscription_id TEXT COLLATE "C",
                endpoint TEXT COLLATE "C" NOT NULL,
                p256dh TEXT COLLATE "C" NOT NULL,
                auth TEXT COLLATE "C" NOT NULL,
                payload BYTEA NOT NULL,
                urgency TEXT COLLATE "C" NOT NULL,
                topic TEXT COLLATE "C",
                ttl BIGINT NOT NULL,
                alarm_id TEXT COLLATE "C",
                created_at BIGINT NOT NULL,
                next_attempt_at BIGINT NOT NULL,
                attempts BIGINT NOT NULL DEFAULT 0,
                claimed_until BIGINT
            )
            """,
            "CREATE INDEX push_outbox_due ON push_outbox(next_attempt_at)",
            "CREATE INDEX push_outbox_by_subscription ON push_outbox(subscription_id)",
            "CREATE INDEX push_outbox_by_alarm ON push_outbox(alarm_id)",
        ]),
        // Issue 15, friends' map (SQLite's v7-friends-map): standing shares, pauses, meeting points, unread messages.
        Migration(version: "v4-friends-map", statements: [
            """
            CREATE TABLE standing_shares (
                owner TEXT COLLATE "C" NOT NULL,
                friend TEXT COLLATE "C" NOT NULL,
                position BIGINT NOT NULL,
                PRIMARY KEY (owner, friend)
            )
            """,
            """
            CREATE TABLE location_pauses (
                owner TEXT COLLATE "C" NOT NULL,
                from_user TEXT COLLATE "C" NOT NULL,
                until BIGINT,
                PRIMARY KEY (owner, from_user)
            )
            """,
            """
            CREATE TABLE meetings (
                id TEXT COLLATE "C" PRIMARY KEY,
                owner TEXT COLLATE "C" NOT NULL,
                name BYTEA NOT NULL,
                lat DOUBLE PRECISION NOT NULL,
                lon DOUBLE PRECISION NOT NULL,
                time BIGINT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE meeting_invitees (
                meeting_id TEXT COLLATE "C" NOT NULL REFERENCES meetings(id) ON DELETE CASCADE,
                username TEXT COLLATE "C" NOT NULL,
                position BIGINT NOT NULL,
                response TEXT COLLATE "C" NOT NULL,
                queued_at BIGINT NOT NULL,
                delivered_at BIGINT,
                PRIMARY KEY (meeting_id, username)
            )
            """,
            """
            CREATE TABLE messages (
                id TEXT COLLATE "C" PRIMARY KEY,
                sender TEXT COLLATE "C" NOT NULL,
                recipient TEXT COLLATE "C" NOT NULL,
                text BYTEA NOT NULL,
                queued_at BIGINT NOT NULL,
                delivered_at BIGINT
            )
            """,
            "CREATE INDEX messages_by_recipient ON messages(recipient)",
        ]),
        // Issue 13: secrets every relay of a cluster must share (the VAPID key, `PostgresStore.sharedSecret`),
        // written once by whichever relay starts first. The value is TEXT like the keys: a PEM is ASCII.
        Migration(version: "v5-secrets", statements: [
            """
            CREATE TABLE relay_secrets (
                name TEXT COLLATE "C" PRIMARY KEY,
                value TEXT COLLATE "C" NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
        ]),
        // Push subscriptions belong to the sign-in that made them, and an endpoint to one account (SQLite's
        // v8-push-sign-ins, the same rules for the rows stored before).
        Migration(version: "v6-push-sign-ins", statements: [
            "ALTER TABLE push_subscriptions ADD COLUMN token_hash TEXT COLLATE \"C\"",
            """
            CREATE TEMP TABLE push_subscriptions_dropped ON COMMIT DROP AS
                SELECT id FROM push_subscriptions p
                WHERE EXISTS (SELECT 1 FROM push_subscriptions q
                              WHERE q.endpoint = p.endpoint
                                AND (q.created_at > p.created_at OR (q.created_at = p.created_at AND q.id > p.id)))
                   OR NOT EXISTS (SELECT 1 FROM tokens t WHERE t.username = p.username)
            """,
            "DELETE FROM push_outbox WHERE subscription_id IN (SELECT id FROM push_subscriptions_dropped)",
            "DELETE FROM push_subscriptions WHERE id IN (SELECT id FROM push_subscriptions_dropped)",
            "CREATE UNIQUE INDEX push_subscriptions_by_endpoint ON push_subscriptions(endpoint)",
            "CREATE INDEX push_subscriptions_by_token ON push_subscriptions(token_hash)",
        ]),
        // Writes of relays sharing the store are checked per user (`PostgresStore.applyChecked`), not against
        // one cluster-wide count under one lock: the count goes.
        Migration(version: "v7-user-versions", statements: [
            """
            CREATE TABLE user_versions (
                username TEXT COLLATE "C" PRIMARY KEY,
                version BIGINT NOT NULL CHECK (version > 0)
            )
            """,
            "DROP SEQUENCE IF EXISTS relay_changes",
        ]),
        // A relay's write is one call of this function, one round trip however many statements it holds
        // (`PostgresStore.applyChecked`): it moves the versions of the write's users on by one (the upsert
        // row-locks them until the commit, in the caller's sorted order), refuses the write when one was not
        // the writer's (SQLSTATE HWVER, the store's versions as JSON in the detail), and runs the statements,
        // each given its values as one JSON array (`PostgresBatch`). One statement commits or rolls back whole.
        Migration(version: "v8-write-function", statements: [
            """
            CREATE FUNCTION homeward_write(users TEXT[], expected BIGINT[], statements TEXT[], arguments JSONB)
            RETURNS TABLE (written_user TEXT, written_version BIGINT)
            LANGUAGE plpgsql AS $function$
            DECLARE
                moved JSONB;
            BEGIN
                WITH m AS (
                    INSERT INTO user_versions AS v (username, version)
                    SELECT u, 1 FROM unnest(users) WITH ORDINALITY AS t(u, n) ORDER BY n
                    ON CONFLICT (username) DO UPDATE SET version = v.version + 1
                    RETURNING v.username, v.version
                )
                SELECT coalesce(jsonb_object_agg(m.username, m.version), '{}') INTO moved FROM m;
                IF EXISTS (SELECT FROM unnest(users, expected) AS t(u, e) WHERE (moved ->> u)::BIGINT <> e + 1) THEN
                    RAISE EXCEPTION 'the writing relay''s cache is behind the store' USING
                        ERRCODE = 'HWVER',
                        DETAIL = (SELECT jsonb_object_agg(key, value::BIGINT - 1) FROM jsonb_each_text(moved))::TEXT;
                END IF;
                FOR i IN 1 .. coalesce(array_length(statements, 1), 0) LOOP
                    EXECUTE statements[i] USING arguments -> (i - 1);
                END LOOP;
                RETURN QUERY SELECT key, value::BIGINT FROM jsonb_each_text(moved);
            END
            $function$
            """,
        ]),
        // One user's part of the state is read through an index on each column that names them
        // (`StoredState.Read.statement(concerning:)`, a relay's slice): the other side of blocks, standing shares
        // and pauses, the proposer and invitees of meeting points, the sender of messages.
        Migration(version: "v9-slice-indexes", statements: [
            "CREATE INDEX blocks_by_blocked ON blocks(blocked)",
            "CREATE INDEX standing_shares_by_friend ON standing_shares(friend)",
            "CREATE INDEX location_pauses_by_from ON location_pauses(from_user)",
            "CREATE INDEX meetings_by_owner ON meetings(owner)",
            "CREATE INDEX meeting_invitees_by_username ON meeting_invitees(username)",
            "CREATE INDEX messages_by_sender ON messages(sender)",
        ]),
        // A cache of connected users starts from what is under way (`StoredState.Read.activeStatement`): pauses with an
        // end are read through an index that holds only them, in the read's order (SQLite's v10-active-indexes; active
        // sessions and alarms have theirs).
        Migration(version: "v10-active-indexes", statements: [
            "CREATE INDEX location_pauses_with_end ON location_pauses(owner, from_user) WHERE until IS NOT NULL",
        ]),
    ]

    /// Brings the database up to date in one transaction: either every missing migration is applied and
    /// recorded, or none is.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version TEXT PRIMARY KEY,
                    applied_at BIGINT NOT NULL
                )
                """, logger: logger)
            var applied = Set<String>()
            for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: logger)
                .decode(String.self) { applied.insert(version) }
            for migration in migrations where !applied.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("""
                    INSERT INTO schema_migrations (version, applied_at)
                    VALUES (\(migration.version), (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)
                    """, logger: logger)
                logger.info("applied PostgreSQL migration", metadata: ["version": "\(migration.version)"])
            }
        }
    }
}
