import HomewardCore
import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// The relay's durable storage on PostgreSQL (`--store postgres://…`), through postgres-nio's
/// connection pool.
///
/// Each call leases a connection for its duration; `apply` runs one transaction. Every call has a
/// deadline: when the server is down or unreachable the call throws `PostgresStoreError.timeout`
/// (the relay answers `internal`) instead of waiting, and once the server is back the pool reconnects
/// by itself, so the relay needs no restart.
///
/// The pool serves calls while `runPool` runs. The relay runs it as a service of its `ServiceGroup`
/// (`prepare`, then `runPool` in the group), which stops it after the relay's last write; a tool or test
/// that uses a store alone calls `open`, which runs the pool until `close`.
public final class PostgresStore: RelayStore {
    /// How long to wait for PostgreSQL.
    public struct Timeouts: Sendable, Equatable {
        /// Establishing one connection (TCP, TLS, authentication).
        public var connect: Duration
        /// One store call from start to end, waiting for a connection included. PostgreSQL is also told
        /// to cancel a statement that runs longer (`statement_timeout`).
        public var query: Duration

        public init(connect: Duration = .seconds(5), query: Duration = .seconds(5)) {
            self.connect = connect
            self.query = query
        }
    }

    public let location: PostgresLocation
    private let client: PostgresClient
    /// The pool's task when this store runs its own (`open`); nil when its owner runs `runPool`.
    private let ownPool: Task<Void, Never>?
    private let timeouts: Timeouts
    private let logger: Logger

    private init(location: PostgresLocation, timeouts: Timeouts, logger: Logger, runsOwnPool: Bool) {
        self.location = location
        self.timeouts = timeouts
        self.logger = logger
        let client = PostgresClient(configuration: Self.configuration(location, timeouts), backgroundLogger: logger)
        self.client = client
        // Detached, so that it inherits nothing from its caller: `PostgresClient.run()` ends at once when the task
        // it runs in sees a graceful shutdown, and a store used alone lives from `open` to `close`.
        self.ownPool = runsOwnPool ? Task.detached { await client.run() } : nil
    }

    /// Connects to the database at `location` and brings its schema up to date; the pool does not run yet:
    /// its owner runs `runPool` (the relay: as a service of its group) and stops it after the last call.
    /// Throws, with PostgreSQL's reason (connection refused, no such database, wrong password), when
    /// that fails, or when connecting takes longer than the connect timeout.
    public static func prepare(_ location: PostgresLocation, timeouts: Timeouts = Timeouts(),
                               logger: Logger = Logger(label: "homeward.postgres")) async throws -> PostgresStore {
        try await migrate(location, timeouts: timeouts, logger: logger)
        return PostgresStore(location: location, timeouts: timeouts, logger: logger, runsOwnPool: false)
    }

    /// `prepare`, and the pool runs until `close`: for tools and tests that use a store alone.
    public static func open(_ location: PostgresLocation, timeouts: Timeouts = Timeouts(),
                            logger: Logger = Logger(label: "homeward.postgres")) async throws -> PostgresStore {
        try await migrate(location, timeouts: timeouts, logger: logger)
        return PostgresStore(location: location, timeouts: timeouts, logger: logger, runsOwnPool: true)
    }

    /// Runs the connection pool (a store from `prepare`) until the calling task is cancelled or, in a
    /// swift-service-lifecycle `ServiceGroup`, until its service's graceful shutdown; then closes its connections.
    public func runPool() async {
        precondition(ownPool == nil, "a store from open runs its own pool")
        await client.run()
    }

    private static func migrate(_ location: PostgresLocation, timeouts: Timeouts, logger: Logger) async throws {
        // One direct connection first: the pool retries a failing server quietly until the deadline,
        // while an operator starting the relay needs the reason.
        let configuration = try connectionConfiguration(location, timeouts)
        do {
            let connection = try await withDeadline(timeouts.connect, operation: "connect") {
                try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            }
            do {
                // Migrating happens once, at start-up, and may wait for another relay's migration
                // (the advisory lock): it gets more time than a request.
                try await withDeadline(max(timeouts.query, migrationTimeout), operation: "migrate") {
                    try await PostgresSchema.migrate(connection, logger: logger)
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try await connection.close()
        } catch {
            throw PostgresStoreError.wrap(error, operation: "connect and migrate")
        }
    }

    static let migrationTimeout = Duration.seconds(60)

    /// Stops the pool of a store from `open` and closes its connections; later calls fail. (A store from
    /// `prepare` closes when its `runPool` ends.)
    public func close() async {
        ownPool?.cancel()
        await ownPool?.value
    }

    public func load() async throws -> StoredState {
        try await withConnection("load") { db, logger in
            try await db.withTransaction(logger: logger) { db in
                // The count a load returns must name only writes its data shows: a relay whose cache has this
                // count takes it for current and writes from it. Every counted write holds the write lock
                // (`writeLock`) exclusively from its first statement until its commit, and draws its count
                // under it; this load holds it shared from its first statement on. So while the load reads,
                // no counted write is between its count and its commit, and none commits: the count read
                // names committed writes only (or rolled-back ones, which left nothing), and every statement
                // after it sees all of them and no later one. READ COMMITTED, not REPEATABLE READ: a repeatable-read snapshot is taken at the first
                // statement, the one that waits for the lock, and would miss a write that commits while it
                // waits; read-committed statements each see what committed before they start, which under
                // the shared lock is the same for all of them, but for last-seen times and token uses
                // (uncounted, they take no lock; any value of them is right).
                _ = try await db.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY", logger: logger).collect()
                _ = try await db.query("SELECT pg_advisory_xact_lock_shared(\(Self.writeLock))", logger: logger).collect()
                let count = try await Self.changeCount(db, logger: logger)
                var stored = try await StoredState(db: db, logger: logger)
                stored.changeCount = count
                return stored
            }
        }
    }

    public func apply(_ changes: [StoreChange]) async throws {
        _ = try await applyCounting(changes, expecting: nil)
    }

    /// The transaction-level advisory lock ("hwwrites") that serialises counted writes (held exclusively)
    /// against each other and against loads (held shared); distinct from the migration lock and the timer lease.
    static let writeLock: Int64 = 0x6877_7772_6974_6573

    /// A write that concerns other relays (`StoreChange.concernsOtherRelays`) takes the write lock first, and
    /// with `expecting` (the writing relay's cache count) checks that no other counted write came since its
    /// cache was loaded: if one did, it throws `StoreCacheBehind` and rolls back, nothing applied. Its count
    /// is drawn under the lock, last, so that counts follow commits in order and the next writer (or load)
    /// sees this count only with this write committed. Without `expecting` (`apply`) it checks nothing.
    /// Writes that concern nobody else (last-seen times, token use) take no lock and are not counted.
    public func applyCounting(_ changes: [StoreChange], expecting: Int64?) async throws -> Int64? {
        guard !changes.isEmpty else { return nil }
        // A key with NUL cannot be stored in TEXT: the whole batch is refused before it reaches the server.
        if let key = changes.lazy.compactMap(\.keyWithNUL).first { throw StoreKeyError(key: key) }
        let counted = changes.contains(where: \.concernsOtherRelays)
        return try await withConnection("write") { db, logger in
            do {
                return try await db.withTransaction(logger: logger) { db -> Int64? in
                    if counted {
                        _ = try await db.query("SELECT pg_advisory_xact_lock(\(Self.writeLock))", logger: logger).collect()
                        let current = try await Self.changeCount(db, logger: logger)
                        if let expecting, current != expecting { throw StoreCacheBehind(expected: expecting, current: current) }
                    }
                    for change in changes { try await change.execute(on: db, logger: logger) }
                    guard counted else { return nil }
                    var count: Int64?
                    for try await value in try await db.query("SELECT nextval('relay_changes')", logger: logger).decode(Int64.self) {
                        count = value
                    }
                    return count
                }
            } catch let error as PostgresTransactionError {
                if let behind = error.closureError as? StoreCacheBehind { throw behind }
                throw error
            }
        }
    }

    public func changeCount() async throws -> Int64? {
        // Read before every request by a relay without a bus barrier: while the server is down it must cost requests little.
        try await withConnection("change count", timeout: min(timeouts.query, Self.changeCountTimeout)) { db, logger in
            try await Self.changeCount(db, logger: logger)
        }
    }

    static let changeCountTimeout = Duration.milliseconds(500)

    /// The sequence's last value (0 before the first write), outside any snapshot: sequences are not transactional.
    /// Read without the write lock (`changeCount()`), it may name a write whose commit is under way: a relay
    /// that then reloads waits for that commit (the load's shared lock), so it is never told a count too small.
    static func changeCount(_ db: PostgresConnection, logger: Logger) async throws -> Int64 {
        var count: Int64 = 0
        for try await (last, called) in try await db.query("SELECT last_value, is_called FROM relay_changes", logger: logger)
            .decode((Int64, Bool).self) { count = called ? last : 0 }
        return count
    }

    public func passwordHash(of username: String) async throws -> String? {
        // PostgreSQL refuses NUL in TEXT; a name with NUL is nobody's (as in the SQLite store).
        guard !username.utf8.contains(0) else { return nil }
        return try await withConnection("password lookup") { db, logger in
            try await Self.single(db.query("SELECT password_hash FROM users WHERE username = \(username)", logger: logger))
        }
    }

    public func username(forTokenHash hash: String) async throws -> String? {
        guard !hash.utf8.contains(0) else { return nil }
        return try await withConnection("token lookup") { db, logger in
            try await Self.single(db.query("SELECT username FROM tokens WHERE hash = \(hash)", logger: logger))
        }
    }

    /// The one text column of at most one row (a lookup by primary key); the rows are read to the end.
    static func single(_ rows: PostgresRowSequence) async throws -> String? {
        var value: String?
        for try await text in rows.decode(String.self) { value = text }
        return value
    }

    /// Runs `body` on a pooled connection within the deadline; every failure becomes a `PostgresStoreError`
    /// naming `operation`.
    func withConnection<T: Sendable>(
        _ operation: String, timeout: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        let client = client
        let logger = logger
        do {
            return try await withDeadline(timeout ?? timeouts.query, operation: operation) {
                try await client.withConnection { db in try await body(db, logger) }
            }
        } catch let behind as StoreCacheBehind {
            // Not a failure of the store: the relay reloads and decides again.
            throw behind
        } catch {
            throw PostgresStoreError.wrap(error, operation: operation)
        }
    }

    private static func configuration(_ location: PostgresLocation, _ timeouts: Timeouts) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS = switch location.tls {
        case .disable: .disable
        case .prefer: .prefer(.makeClientConfiguration())
        case .require: .require(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(
            host: location.host, port: location.port, username: location.username, password: location.password,
            database: location.database, tls: tls)
        configuration.options.connectTimeout = timeouts.connect
        // The relay runs one operation at a time; a few connections cover lookups during a slow write.
        configuration.options.maximumConnections = 4
        configuration.options.additionalStartupParameters = startupParameters(timeouts)
        return configuration
    }

    /// The same settings as `configuration`, for the single connection `open` makes.
    static func connectionConfiguration(
        _ location: PostgresLocation, _ timeouts: Timeouts
    ) throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS = switch location.tls {
        case .disable: .disable
        case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(
            host: location.host, port: location.port, username: location.username, password: location.password,
            database: location.database, tls: tls)
        configuration.options.connectTimeout = .nanoseconds(Int64(timeouts.connect.seconds * 1e9))
        configuration.options.additionalStartupParameters = startupParameters(timeouts)
        return configuration
    }

    private static func startupParameters(_ timeouts: Timeouts) -> [(String, String)] {
        let queryMilliseconds = Int64(timeouts.query.seconds * 1000)
        return [
            ("statement_timeout", "\(queryMilliseconds)"),
            // A transaction left open by a client that stopped answering must not hold its locks.
            ("idle_in_transaction_session_timeout", "\(queryMilliseconds * 2)"),
            ("application_name", "homeward-relay"),
        ]
    }
}
