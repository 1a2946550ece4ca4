import GRDB

/// The database schema, built by versioned migrations. Never edit a registered migration: add a new one.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE users (
                    username TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL,
                    password_hash TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    last_seen INTEGER
                );

                CREATE TABLE tokens (
                    hash TEXT PRIMARY KEY NOT NULL,
                    username TEXT NOT NULL REFERENCES users(username) ON DELETE CASCADE,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX tokens_by_username ON tokens(username);

                CREATE TABLE friend_requests (
                    from_user TEXT NOT NULL,
                    to_user TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (from_user, to_user)
                );
                CREATE INDEX friend_requests_by_recipient ON friend_requests(to_user);

                -- Each pair is stored once, smaller username first.
                CREATE TABLE friendships (
                    user_a TEXT NOT NULL,
                    user_b TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (user_a, user_b),
                    CHECK (user_a < user_b)
                );
                CREATE INDEX friendships_by_user_b ON friendships(user_b);

                CREATE TABLE alarm_contacts (
                    owner TEXT NOT NULL,
                    contact TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    PRIMARY KEY (owner, contact)
                );

                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY NOT NULL,
                    owner TEXT NOT NULL,
                    note TEXT,
                    started_at INTEGER NOT NULL,
                    ended_at INTEGER,
                    end_reason TEXT
                );
                CREATE UNIQUE INDEX sessions_active_by_owner ON sessions(owner) WHERE ended_at IS NULL;

                CREATE TABLE session_invitees (
                    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                    username TEXT NOT NULL,
                    state TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    PRIMARY KEY (session_id, username)
                );
                CREATE INDEX session_invitees_by_username ON session_invitees(username);

                -- The position columns are all NULL when the alarm has no position.
                CREATE TABLE alarms (
                    id TEXT PRIMARY KEY NOT NULL,
                    owner TEXT NOT NULL,
                    text TEXT NOT NULL,
                    lat REAL,
                    lon REAL,
                    acc REAL,
                    alt REAL,
                    spd REAL,
                    hdg REAL,
                    batt REAL,
                    pos_ts INTEGER,
                    created_at INTEGER NOT NULL,
                    auto INTEGER NOT NULL DEFAULT 0,
                    ended_at INTEGER,
                    end_reason TEXT,
                    CHECK ((lat IS NULL) = (lon IS NULL) AND (lat IS NULL) = (pos_ts IS NULL))
                );
                CREATE INDEX alarms_active_by_owner ON alarms(owner) WHERE ended_at IS NULL;

                CREATE TABLE alarm_recipients (
                    alarm_id TEXT NOT NULL REFERENCES alarms(id) ON DELETE CASCADE,
                    username TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    delivered_at INTEGER,
                    acked_at INTEGER,
                    ack_order INTEGER,
                    PRIMARY KEY (alarm_id, username)
                );
                CREATE INDEX alarm_recipients_by_username ON alarm_recipients(username);
                """)
        }
        // The safety extensions: check-in deadlines, destinations, expiry, lost contact, alarm repeats.
        migrator.registerMigration("v2-safety") { db in
            try db.execute(sql: """
                ALTER TABLE sessions ADD COLUMN check_in_by INTEGER;
                ALTER TABLE sessions ADD COLUMN dest_lat REAL;
                ALTER TABLE sessions ADD COLUMN dest_lon REAL;
                ALTER TABLE sessions ADD COLUMN dest_radius REAL;
                ALTER TABLE sessions ADD COLUMN expires_at INTEGER;
                ALTER TABLE sessions ADD COLUMN lost_since INTEGER;
                ALTER TABLE alarms ADD COLUMN repeats INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE alarms ADD COLUMN next_repeat_at INTEGER;
                """)
        }
        // Issue 11: users can block others (their friend requests then reach nobody).
        migrator.registerMigration("v3-blocks") { db in
            try db.execute(sql: """
                CREATE TABLE blocks (
                    blocker TEXT NOT NULL,
                    blocked TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (blocker, blocked)
                );
                """)
        }
        // Issue 11: tokens expire after a lifetime without use, so their last use is kept.
        migrator.registerMigration("v4-token-use") { db in
            try db.execute(sql: """
                ALTER TABLE tokens ADD COLUMN last_used INTEGER;
                UPDATE tokens SET last_used = created_at;
                """)
        }
        // Protocol 1.1 share links: only the SHA-256 of each token is kept.
        migrator.registerMigration("v5-shares") { db in
            try db.execute(sql: """
                CREATE TABLE shares (
                    id TEXT PRIMARY KEY,
                    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                    owner TEXT NOT NULL,
                    token_hash TEXT NOT NULL UNIQUE,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                );
                CREATE INDEX shares_by_session ON shares(session_id);
                """)
        }
        // Issue 14: Web Push subscriptions, and the durable outbox of pushes and webhook calls.
        migrator.registerMigration("v6-push") { db in
            try db.execute(sql: """
                CREATE TABLE push_subscriptions (
                    id TEXT PRIMARY KEY NOT NULL,
                    username TEXT NOT NULL,
                    endpoint TEXT NOT NULL,
                    p256dh TEXT NOT NULL,
                    auth TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX push_subscriptions_by_username ON push_subscriptions(username);

                -- Endpoint and keys are copied from the subscription: an entry is sent as it was queued.
                CREATE TABLE push_outbox (
                    id TEXT PRIMARY KEY NOT NULL,
                    kind TEXT NOT NULL,
                    subscription_id TEXT,
                    endpoint TEXT NOT NULL,
                    p256dh TEXT NOT NULL,
                    auth TEXT NOT NULL,
                    payload BLOB NOT NULL,
                    urgency TEXT NOT NULL,
                    topic TEXT,
                    ttl INTEGER NOT NULL,
                    alarm_id TEXT,
                    created_at INTEGER NOT NULL,
                    next_attempt_at INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    -- Set while a relay is sending the entry (see PushOutboxStore.claimDueOutboxEntries).
                    claimed_until INTEGER
                );
                CREATE INDEX push_outbox_due ON push_outbox(next_attempt_at);
                CREATE INDEX push_outbox_by_subscription ON push_outbox(subscription_id);
                CREATE INDEX push_outbox_by_alarm ON push_outbox(alarm_id);
                """)
        }
        // Issue 15, friends' map: standing shares, pauses, meeting points, unread messages.
        migrator.registerMigration("v7-friends-map") { db in
            try db.execute(sql: """
                CREATE TABLE standing_shares (
                    owner TEXT NOT NULL,
                    friend TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    PRIMARY KEY (owner, friend)
                );

                -- from_user is '' for a pause from everyone.
                CREATE TABLE location_pauses (
                    owner TEXT NOT NULL,
                    from_user TEXT NOT NULL,
                    until INTEGER,
                    PRIMARY KEY (owner, from_user)
                );

                CREATE TABLE meetings (
                    id TEXT PRIMARY KEY NOT NULL,
                    owner TEXT NOT NULL,
                    name TEXT NOT NULL,
                    lat REAL NOT NULL,
                    lon REAL NOT NULL,
                    time INTEGER NOT NULL,
                    created_at INTEGER NOT NULL
                );

                CREATE TABLE meeting_invitees (
                    meeting_id TEXT NOT NULL REFERENCES meetings(id) ON DELETE CASCADE,
                    username TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    response TEXT NOT NULL,
                    queued_at INTEGER NOT NULL,
                    delivered_at INTEGER,
                    PRIMARY KEY (meeting_id, username)
                );

                CREATE TABLE messages (
                    id TEXT PRIMARY KEY NOT NULL,
                    sender TEXT NOT NULL,
                    recipient TEXT NOT NULL,
                    text TEXT NOT NULL,
                    queued_at INTEGER NOT NULL,
                    delivered_at INTEGER
                );
                CREATE INDEX messages_by_recipient ON messages(recipient);
                """)
        }
        // Push subscriptions belong to the sign-in that made them, and an endpoint to one account. Rows
        // stored before keep no token (NULL): they end with the account's first sign-out of any kind
        // (`RelayState.endPushSubscriptions`). Where several accounts share an endpoint, the newest
        // subscription keeps it and the older ones go, with their waiting pushes; an account with no
        // sign-in left loses its old rows, since no sign-in could end them.
        migrator.registerMigration("v8-push-sign-ins") { db in
            try db.execute(sql: """
                ALTER TABLE push_subscriptions ADD COLUMN token_hash TEXT;
                CREATE TEMP TABLE push_subscriptions_dropped AS
                    SELECT id FROM push_subscriptions p
                    WHERE EXISTS (SELECT 1 FROM push_subscriptions q
                                  WHERE q.endpoint = p.endpoint
                                    AND (q.created_at > p.created_at OR (q.created_at = p.created_at AND q.id > p.id)))
                       OR NOT EXISTS (SELECT 1 FROM tokens t WHERE t.username = p.username);
                DELETE FROM push_outbox WHERE subscription_id IN (SELECT id FROM push_subscriptions_dropped);
                DELETE FROM push_subscriptions WHERE id IN (SELECT id FROM push_subscriptions_dropped);
                DROP TABLE push_subscriptions_dropped;
                CREATE UNIQUE INDEX push_subscriptions_by_endpoint ON push_subscriptions(endpoint);
                CREATE INDEX push_subscriptions_by_token ON push_subscriptions(token_hash);
                """)
        }
        // One user's part of the state is read through an index on each column that names them
        // (`StoredState.Read.statement(concerning:)`, a relay's slice): the other side of blocks, standing shares
        // and pauses, the proposer and invitees of meeting points, the sender of messages.
        migrator.registerMigration("v9-slice-indexes") { db in
            try db.execute(sql: """
                CREATE INDEX blocks_by_blocked ON blocks(blocked);
                CREATE INDEX standing_shares_by_friend ON standing_shares(friend);
                CREATE INDEX location_pauses_by_from ON location_pauses(from_user);
                CREATE INDEX meetings_by_owner ON meetings(owner);
                CREATE INDEX meeting_invitees_by_username ON meeting_invitees(username);
                CREATE INDEX messages_by_sender ON messages(sender);
                """)
        }
        // A cache of connected users starts from what is under way (`StoredState.Read.activeStatement`): pauses with an
        // end are read through an index that holds only them, in the read's order (active sessions and alarms have theirs).
        migrator.registerMigration("v10-active-indexes") { db in
            try db.execute(sql: """
                CREATE INDEX location_pauses_with_end ON location_pauses(owner, from_user) WHERE until IS NOT NULL;
                """)
        }
        return migrator
    }
}
