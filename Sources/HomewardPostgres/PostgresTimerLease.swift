import HomewardCore
import Logging
import PostgresNIO

/// Splits the timers (check-in deadlines, alarm repeats, lost contact, expiry, pause ends) among the relays
/// sharing one database: each of the `TimerShards.count` shards is fired by the relay holding its
/// PostgreSQL session-level advisory lock, all of one relay's locks on one connection of its own.
///
/// Why locks rather than claiming due rows (`UPDATE ... RETURNING`): the timers are computed from the
/// relay's cached state (alarm repeat counts, who is offline since when), not only from rows, and one
/// holder per shard firing from its cache keeps the rules exactly as on a single relay. A lock belongs to
/// the connection's session, so PostgreSQL releases all of a relay's shards by itself when it dies (its
/// socket closes; TCP keepalives catch a host that vanished), and the others take them at their next check.
///
/// How many relays compete is counted in PostgreSQL too: each lease holds a shared "member" lock, and
/// `pg_locks` lists the holders. So the count and the shards come from one failure detector (a relay whose
/// lease connection is gone is neither counted nor holding anything), and one query a check shows both.
/// Each check, a relay releases what it holds above its fair share and tries free shards up to it
/// (`TimerShareDecision`).
///
/// Once a second the relay runs that query, which also checks its connection; when it fails the relay gives
/// all its shards up at once (`onChange(.none)`), before PostgreSQL could have given them to another relay
/// that then fires too. A shard to release is given up by the relay first (`onChange` returns once the
/// relay fires nothing of it) and unlocked after. While a relay of an older version holds the single lock
/// that named one relay for all timers, this lease holds no shard.
///
/// The relay runs `run` as a service of its group, stopped after the relay's last write.
public struct PostgresTimerLease: Sendable {
    private let location: PostgresLocation
    private let timeouts: PostgresStore.Timeouts
    private let node: String
    private let logger: Logger

    /// The first key of the two-key advisory locks: "hwts" (`pg_try_advisory_lock(shardLockClass, shard)`),
    /// distinct from the migration lock (one bigint key), as all keys here are.
    public static let shardLockClass: Int32 = 0x6877_7473
    /// "hwtm": the shared lock every competing lease holds, `(memberLockClass, 0)`.
    public static let memberLockClass: Int32 = 0x6877_746d
    /// The one lock ("hwtimers") a relay of an older version holds to fire all timers.
    public static let singleOwnerKey: Int64 = 0x6877_7469_6d65_7273
    public static let checkInterval = Duration.seconds(1)
    /// What `pg_stat_activity` shows for a lease's connection, followed by the relay's node id.
    public static let applicationName = "homeward-relay timers"

    public init(_ location: PostgresLocation, timeouts: PostgresStore.Timeouts, node: String, logger: Logger) {
        self.location = location
        self.timeouts = timeouts
        self.node = node
        self.logger = logger
    }

    /// Competes for the shards until the calling task is cancelled: `onChange` is called with the shards the
    /// relay fires from then on, whenever they change, and returns once the relay applied them. It is called
    /// with `.none` when the lease loses its connection or stops, before the connection closes (closing
    /// releases the locks for the other relays).
    public func run(onChange: @escaping @Sendable (TimerShards) async -> Void) async {
        while !Task.isCancelled {
            var held = TimerShards.none
            do {
                var settings = try PostgresStore.connectionConfiguration(location, timeouts)
                settings.options.additionalStartupParameters += [
                    ("tcp_keepalives_idle", "5"), ("tcp_keepalives_interval", "2"), ("tcp_keepalives_count", "2"),
                    ("application_name", "\(Self.applicationName) \(node)"),
                ]
                let configuration = settings
                let logger = self.logger
                let connection = try await withDeadline(timeouts.connect, operation: "connect for the timer locks") {
                    try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
                }
                do {
                    try await compete(connection, held: &held, onChange: onChange)
                } catch {
                    if !held.isEmpty { await onChange(.none) }
                    held = .none
                    try? await connection.close()
                    throw error
                }
                if !held.isEmpty { await onChange(.none) }
                held = .none
                try? await connection.close()
            } catch {
                if !Task.isCancelled {
                    logger.warning("timer lock connection failed; trying again", metadata: ["error": "\(String(reflecting: error))"])
                }
            }
            if Task.isCancelled { return }
            try? await Task.sleep(for: Self.checkInterval)
        }
    }

    /// Joins the competing relays, then once a check interval looks at the locks and releases or takes shards,
    /// until cancelled or the connection fails.
    private func compete(_ connection: PostgresConnection, held: inout TimerShards,
                         onChange: @Sendable (TimerShards) async -> Void) async throws {
        let logger = self.logger
        _ = try await withDeadline(timeouts.query, operation: "timer lease join") {
            try await connection.query("SELECT pg_advisory_lock_shared(\(unescaped: "\(Self.memberLockClass)"), 0)", logger: logger).collect()
        }
        while !Task.isCancelled {
            let locks = try await withDeadline(timeouts.query, operation: "timer lock check") {
                try await Self.look(connection, logger: logger)
            }
            let decision = locks.singleOwnerHeld
                ? TimerShareDecision(release: held)
                : TimerShareDecision(held: held, heldElsewhere: locks.heldElsewhere, relays: locks.relays,
                                     start: Int.random(in: 0..<TimerShards.count))
            if !decision.release.isEmpty {
                held = held.subtracting(decision.release)
                await onChange(held)
                let released = decision.release
                _ = try await withDeadline(timeouts.query, operation: "timer lock release") {
                    try await connection.query("""
                        SELECT pg_advisory_unlock(\(unescaped: "\(Self.shardLockClass)"), s)
                        FROM unnest(\(released.members.map { Int32($0) })::int4[]) AS s
                        """, logger: logger).collect()
                }
            }
            if !decision.take.isEmpty {
                let wanted = decision.take
                let taken = try await withDeadline(timeouts.query, operation: "timer lock") {
                    try await Self.tryLock(wanted, connection, logger: logger)
                }
                if !taken.isEmpty {
                    held = held.union(taken)
                    await onChange(held)
                }
            }
            try await Task.sleep(for: Self.checkInterval)
        }
    }

    /// The timer locks of this database as PostgreSQL shows them to this connection.
    struct Locks {
        var heldElsewhere = TimerShards.none
        /// Leases holding the member lock, this one included.
        var relays = 0
        var singleOwnerHeld = false
    }

    private static func look(_ connection: PostgresConnection, logger: Logger) async throws -> Locks {
        let rows = try await connection.query("""
            SELECT classid::int8, objid::int8, objsubid::int4, pid = pg_backend_pid()
            FROM pg_locks
            WHERE locktype = 'advisory' AND granted
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """, logger: logger)
        var locks = Locks()
        for try await (classid, objid, subid, mine) in rows.decode((Int64, Int64, Int32, Bool).self) {
            switch (classid, subid) {
            case (Int64(shardLockClass), 2) where !mine && (0..<Int64(TimerShards.count)).contains(objid):
                locks.heldElsewhere.insert(Int(objid))
            case (Int64(memberLockClass), 2) where objid == 0:
                locks.relays += 1
            // A bigint key shows as its high and low halves.
            case (singleOwnerKey >> 32, 1) where objid == singleOwnerKey & 0xFFFF_FFFF:
                locks.singleOwnerHeld = true
            default:
                break
            }
        }
        return locks
    }

    private static func tryLock(_ shards: TimerShards, _ connection: PostgresConnection, logger: Logger) async throws -> TimerShards {
        let rows = try await connection.query("""
            SELECT s, pg_try_advisory_lock(\(unescaped: "\(shardLockClass)"), s)
            FROM unnest(\(shards.members.map { Int32($0) })::int4[]) AS s
            """, logger: logger)
        var taken = TimerShards.none
        for try await (shard, locked) in rows.decode((Int32, Bool).self) where locked {
            taken.insert(Int(shard))
        }
        return taken
    }
}
