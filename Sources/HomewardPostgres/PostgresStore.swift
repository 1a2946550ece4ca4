import Foundation
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
            let connection: PostgresConnection
            do {
                connection = try await withDeadline(timeouts.connect, operation: "connect") {
                    try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                }
            } catch {
                throw PostgresStoreError.connectFailure(error, location: location)
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
                // One snapshot for every table: the versions a load returns name exactly the writes its data
                // shows (writes commit their data and their users' versions together), so a relay applies a
                // notice's commit only when the load did not already hold it (`NoticeSequencer`).
                _ = try await db.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger).collect()
                var stored = try await StoredState(db: db, logger: logger)
                var versions = UserVersions()
                for try await (user, version) in try await db.query("SELECT username, version FROM user_versions", logger: logger)
                    .decode((String, Int64).self) { versions[user] = version }
                stored.versions = versions
                return stored
            }
        }
    }

    /// As `load`, in one snapshot with the versions of those users and of the owners its rows name
    /// (`StoredState.ownersNamed(besides:)`; 0 for one no write concerned yet), so a relay applies a notice's commit
    /// about them only when the slice did not already hold it.
    public func loadSlice(of users: Set<String>) async throws -> StoredState {
        // PostgreSQL refuses NUL in TEXT; a name with NUL is nobody's.
        let names = users.filter { !$0.utf8.contains(0) }.sorted()
        return try await withConnection("load slice") { db, logger in
            try await db.withTransaction(logger: logger) { db in
                _ = try await db.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger).collect()
                var stored = try await StoredState(db: db, concerning: names, logger: logger)
                let named = users.union(stored.ownersNamed(besides: users))
                let versioned = named.filter { !$0.utf8.contains(0) }.sorted()
                var versions = Dictionary(uniqueKeysWithValues: named.map { ($0, Int64(0)) })
                for try await (user, version) in try await db.query(
                    "SELECT username, version FROM user_versions WHERE username = ANY(\(versioned)::text[])", logger: logger
                ).decode((String, Int64).self) { versions[user] = version }
                stored.versions = versions
                return stored
            }
        }
    }

    /// The reads of a load that bring what is under way (`StoredState.Read.activeStatement`), in one REPEATABLE READ,
    /// READ ONLY transaction like `loadSlice`, through indexes of the active rows only. No versions: the users these
    /// rows name are not resident in a cache that starts from them; their versions come with their slices.
    public func loadActive() async throws -> StoredState {
        try await withConnection("load active") { db, logger in
            try await db.withTransaction(logger: logger) { db in
                _ = try await db.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger).collect()
                return try await StoredState(activeRowsIn: db, logger: logger)
            }
        }
    }

    /// A range of the users' primary key (`UsernamePrefix`; its keys are `COLLATE "C"`, so the range is the one
    /// the index is ordered by): no name outside it is read.
    public func searchUsers(prefix: String, limit: Int) async throws -> [UserProfile] {
        guard let range = UsernamePrefix(prefix), limit > 0 else { return [] }
        return try await withConnection("search users") { db, logger in
            try await db.query(PostgresQuery(stored: range.statement(limit: limit)), logger: logger).collect()
                .map { try UsernamePrefix.profile(from: PostgresRandomAccessRow($0)) }
        }
    }

    public func apply(_ changes: [StoreChange]) async throws {
        _ = try await applyChecked(changes, scope: nil)
    }

    /// With a `scope`, moves each of its users' versions on by one first, in the transaction (one upsert, which
    /// row-locks those users until the commit, so writes about a common user go one after the other and
    /// writes about other users do not wait), and when a version was not the one the relay's cache holds
    /// throws `StoreCacheBehind` and rolls back, nothing applied. Without a scope (`apply`) it checks nothing.
    ///
    /// The whole write is one call of `homeward_write` (`PostgresSchema`), so one round trip to the server
    /// however many statements the batch holds: it checks the scope, runs the statements, and commits, as one
    /// statement does.
    ///
    /// A batch holds several decisions' changes, so two relays' batches can lock the same rows in another
    /// order (a token's row, a user's last-seen time): when PostgreSQL breaks such a deadlock by rolling this
    /// write back, it runs again, up to `deadlockRetries` times (its check, too, is made again).
    public func applyChecked(_ changes: [StoreChange], scope: UserVersions?) async throws -> UserVersions? {
        guard let write = try checkedWrite(changes, scope: scope) else { return scope == nil ? nil : [:] }
        return try await withConnection("write", write)
    }

    /// As `applyChecked`, the way the relay commits its batches: the call is one task (with its deadline, `DeadlineCall`)
    /// from the relay's queue to the pooled connection and back to `completion`, with no task around it.
    public func applyChecked(_ changes: [StoreChange], scope: UserVersions?,
                             completion: @escaping @Sendable (Result<UserVersions?, any Error>) -> Void) {
        let write: @Sendable (PostgresConnection, Logger) async throws -> UserVersions?
        do {
            guard let checked = try checkedWrite(changes, scope: scope) else { return completion(.success(scope == nil ? nil : [:])) }
            write = checked
        } catch {
            return completion(.failure(error))
        }
        startWithConnection("write", write, completion: completion)
    }

    /// The body of a checked write on a connection; nil when there is nothing to write. Throws `StoreKeyError`,
    /// before anything reaches the server, for a batch with NUL in a TEXT value or a scope's user.
    private func checkedWrite(
        _ changes: [StoreChange], scope: UserVersions?
    ) throws -> (@Sendable (PostgresConnection, Logger) async throws -> UserVersions?)? {
        guard !changes.isEmpty else { return nil }
        // A string with NUL cannot be stored in TEXT: the whole batch is refused before it reaches the server.
        let write = PostgresBatch(try changes.statements())
        if let key = scope?.keys.first(where: { $0.utf8.contains(0) }) { throw StoreKeyError(key: key) }
        let users = scope.map { $0.keys.sorted() } ?? []
        let expected = users.map { scope?[$0] ?? 0 }
        return { db, logger in
            var attempt = 1
            while true {
                do {
                    var moved = UserVersions()
                    for try await (user, version) in try await db.query("""
                        SELECT written_user, written_version FROM homeward_write(\(users)::text[], \(expected)::bigint[],
                                                                     \(write.statements)::text[], \(write.argumentsJSON)::jsonb)
                        """, logger: logger).decode((String, Int64).self) { moved[user] = version }
                    return scope == nil ? nil : moved
                } catch let error as PSQLError {
                    if let behind = Self.cacheBehind(error, expected: scope) { throw behind }
                    guard Self.isDeadlock(error), attempt < Self.deadlockRetries else { throw error }
                    logger.notice("PostgreSQL broke a deadlock between two writes; writing again", metadata: ["attempt": "\(attempt)"])
                    attempt += 1
                }
            }
        }
    }

    /// How many times a write PostgreSQL rolled back to break a deadlock is run.
    static let deadlockRetries = 5

    /// `homeward_write`'s refusal (SQLSTATE `HWVER`): a version was not the cache's. Its detail holds the store's
    /// versions of the write's users, as a JSON object.
    static func cacheBehind(_ error: PSQLError, expected: UserVersions?) -> StoreCacheBehind? {
        guard let expected, error.serverInfo?[.sqlState] == PostgresSchema.cacheBehindState else { return nil }
        let detail = Data((error.serverInfo?[.detail] ?? "").utf8)
        let current = (try? JSONDecoder().decode([String: Int64].self, from: detail)) ?? [:]
        return StoreCacheBehind(expected: expected, current: current)
    }

    /// PostgreSQL's deadlock error (SQLSTATE 40P01): it rolled one of the writes back.
    static func isDeadlock(_ error: PSQLError) -> Bool {
        error.serverInfo?[.sqlState] == "40P01"
    }

    public func versions(of users: [String]) async throws -> UserVersions? {
        // Asked before a request by a relay without a bus barrier: while the server is down it must cost requests little.
        let users = users.filter { !$0.utf8.contains(0) }
        return try await withConnection("versions", timeout: min(timeouts.query, Self.versionsTimeout)) { db, logger in
            var versions = UserVersions()
            for try await (user, version) in try await db.query(
                "SELECT username, version FROM user_versions WHERE username = ANY(\(users)::text[])", logger: logger
            ).decode((String, Int64).self) { versions[user] = version }
            return versions
        }
    }

    static let versionsTimeout = Duration.milliseconds(500)

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

    /// A lookup by the links' unique token hash.
    public func shareOwner(forTokenHash hash: String) async throws -> String? {
        guard !hash.utf8.contains(0) else { return nil }
        return try await withConnection("share link lookup") { db, logger in
            try await Self.single(db.query("SELECT owner FROM shares WHERE token_hash = \(hash)", logger: logger))
        }
    }

    /// One query for every hash (the tokens' primary key, `= ANY`).
    public func usernames(forTokenHashes hashes: [String]) async throws -> [String: String] {
        let hashes = hashes.filter { !$0.utf8.contains(0) }
        guard !hashes.isEmpty else { return [:] }
        return try await withConnection("token lookup") { db, logger in
            var found: [String: String] = [:]
            for try await (hash, username) in try await db.query(
                "SELECT hash, username FROM tokens WHERE hash = ANY(\(hashes)::text[])", logger: logger
            ).decode((String, String).self) { found[hash] = username }
            return found
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
        } catch {
            throw Self.storeError(error, operation: operation)
        }
    }

    /// `withConnection` for a caller that does not wait: `completion` gets the result once, from the call's task or
    /// at its deadline. Returns the call's task (it ends after the body, whose result is dropped when the deadline came first).
    @discardableResult
    func startWithConnection<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) -> Task<Void, Never> {
        let client = client
        let logger = logger
        return DeadlineCall<T>().start(timeouts.query, operation: operation, {
            try await client.withConnection { db in try await body(db, logger) }
        }, completion: { result in
            completion(result.mapError { Self.storeError($0, operation: operation) })
        })
    }

    /// A store call's failure as the relay sees it: `StoreCacheBehind` is not a failure of the store (the relay
    /// reads back and decides again), everything else a `PostgresStoreError` naming `operation`.
    private static func storeError(_ error: any Error, operation: String) -> any Error {
        if let behind = error as? StoreCacheBehind { return behind }
        return PostgresStoreError.wrap(error, operation: operation)
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
        // The relay has one batch with the store at a time; a few connections cover lookups during a slow write.
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
