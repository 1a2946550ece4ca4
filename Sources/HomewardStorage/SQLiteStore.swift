import Foundation
import GRDB
import HomewardCore

/// The relay's durable storage: one SQLite database in WAL mode, written by one connection.
///
/// Every call uses GRDB's asynchronous accessors: the work runs on GRDB's own serial writer (or
/// reader) queue, and the caller's thread is free meanwhile.
public final class SQLiteStore: RelayStore {
    /// Internal for the outbox extension (`SQLiteStore+Outbox.swift`).
    let writer: any DatabaseWriter

    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    public convenience init(path: String) throws {
        try OwnerOnlyFiles.createDirectory(URL(fileURLWithPath: path).deletingLastPathComponent().path)
        try OwnerOnlyFiles.prepareDatabase(at: path)
        let pool = try DatabasePool(path: path, configuration: Self.configuration())
        // DatabasePool switches the writer to `synchronous = NORMAL` when it activates WAL, after
        // `prepareDatabase` has run. An alarm must survive a power cut once it is acknowledged to its
        // owner, so put FULL back: every commit then syncs the WAL.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try self.init(writer: pool)
        // On the writer, between transactions: the log at its working size before the first commit of this run.
        try pool.writeWithoutTransaction { db in
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            let pages = try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") ?? 1000
            WriteAheadLog.extend(path + "-wal", to: WriteAheadLog.workingSize(pageSize: pageSize, pages: pages))
        }
    }

    /// A private in-memory database, for tests.
    public static func inMemory() throws -> SQLiteStore {
        try SQLiteStore(writer: DatabaseQueue(configuration: configuration()))
    }

    private init(writer: any DatabaseWriter) throws {
        self.writer = writer
        try Schema.migrator.migrate(writer)
    }

    private static func configuration() -> Configuration {
        var config = Configuration()
        config.label = "homeward.store"
        config.foreignKeysEnabled = true
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in
            if !db.configuration.readonly { try db.execute(sql: "PRAGMA synchronous = FULL") }
        }
        return config
    }

    public func load() async throws -> StoredState {
        try await writer.read { db in try StoredState(db: db) }
    }

    public func loadSlice(of users: Set<String>) async throws -> StoredState {
        // Bound as a C string, a name with NUL would be compared cut short (see ExactText): it is nobody's.
        let names = users.filter(ExactText.isStorableKey).sorted()
        return try await writer.read { db in try StoredState(db: db, concerning: names) }
    }

    /// The reads of a load that bring what is under way (`StoredState.Read.activeStatement`), in one GRDB read: one
    /// snapshot, through indexes of the active rows only.
    public func loadActive() async throws -> StoredState {
        try await writer.read { db in try StoredState(activeRowsIn: db) }
    }

    /// A range of the users' primary key (`UsernamePrefix`): no name outside it is read.
    public func searchUsers(prefix: String, limit: Int) async throws -> [UserProfile] {
        guard let range = UsernamePrefix(prefix), limit > 0 else { return [] }
        return try await writer.read { db in
            try range.statement(limit: limit).fetchAll(in: db).map(UsernamePrefix.profile)
        }
    }

    public func apply(_ changes: [StoreChange]) async throws {
        guard !changes.isEmpty else { return }
        try await writer.write { db in try Self.execute(changes, in: db) }
    }

    /// On GRDB's writer queue, and `completion` called there once committed: no hop through the concurrency
    /// pool on the way in or out (`RelayStore.applyChecked(_:scope:completion:)`). One relay alone: no versions.
    public func applyChecked(_ changes: [StoreChange], scope: UserVersions?,
                             completion: @escaping @Sendable (Result<UserVersions?, any Error>) -> Void) {
        guard !changes.isEmpty else { return completion(.success(nil)) }
        writer.asyncWrite({ db in try Self.execute(changes, in: db) }, completion: { _, result in completion(result.map { nil }) })
    }

    public func passwordHash(of username: String) async throws -> String? {
        try await writer.read { db in try Self.passwordHash(of: username, in: db) }
    }

    public func username(forTokenHash hash: String) async throws -> String? {
        try await writer.read { db in try Self.username(forTokenHash: hash, in: db) }
    }

    /// A lookup by the links' unique token hash.
    public func shareOwner(forTokenHash hash: String) async throws -> String? {
        guard ExactText.isStorableKey(hash) else { return nil }
        return try await writer.read { db in
            try String.fetchOne(db, sql: "SELECT owner FROM shares WHERE token_hash = ?", arguments: [hash])
        }
    }

    /// One read (one snapshot) for every hash, each a lookup by the tokens' primary key.
    public func usernames(forTokenHashes hashes: [String]) async throws -> [String: String] {
        guard !hashes.isEmpty else { return [:] }
        return try await writer.read { db in
            var found: [String: String] = [:]
            for hash in hashes { found[hash] = try Self.username(forTokenHash: hash, in: db) }
            return found
        }
    }

    private static func execute(_ changes: [StoreChange], in db: Database) throws {
        for statement in try changes.statements() { try statement.execute(in: db) }
    }

    private static func passwordHash(of username: String, in db: Database) throws -> String? {
        // Bound as a C string, "kate1\u{0}" would be compared as "kate1" (see ExactText).
        guard ExactText.isStorableKey(username) else { return nil }
        return try String.fetchOne(db, sql: "SELECT password_hash FROM users WHERE username = ?", arguments: [username])
    }

    private static func username(forTokenHash hash: String, in db: Database) throws -> String? {
        guard ExactText.isStorableKey(hash) else { return nil }
        return try String.fetchOne(db, sql: "SELECT username FROM tokens WHERE hash = ?", arguments: [hash])
    }

    /// Closes the database; later calls throw.
    public func close() throws {
        try writer.close()
    }

    /// Runs `body` on the writer connection outside a transaction, for diagnostics and tests (e.g. pragmas).
    func inspect<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.writeWithoutTransaction(body)
    }
}
