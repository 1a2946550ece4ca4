import Foundation
import GRDB
import HomewardCore
@testable import HomewardStorage
import XCTest

/// What only the SQLite store has: its file settings, the in-memory store, and rows of older versions.
/// Everything a store must do is in `StoreContractTests`, run for SQLite and PostgreSQL.
final class SQLiteStoreTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("homeward-sqlite-\(UUID().uuidString)", isDirectory: true)
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// A database file in a directory that does not exist yet, to check the store creates it.
    private var path: String { directory.appendingPathComponent("data/relay.sqlite").path }

    private func open() throws -> SQLiteStore { try SQLiteStore(path: path) }

    func testDatabaseIsWALWithFullSyncAndForeignKeys() async throws {
        for store in [try open(), try open()] {  // a fresh file, then an existing one
            try store.inspect { db in
                XCTAssertEqual(try String.fetchOne(db, sql: "PRAGMA journal_mode"), "wal")
                XCTAssertEqual(try Int.fetchOne(db, sql: "PRAGMA synchronous"), 2)  // FULL
                XCTAssertEqual(try Int.fetchOne(db, sql: "PRAGMA foreign_keys"), 1)
                XCTAssertEqual(try Bool.fetchOne(db, sql: "SELECT COUNT(*) > 0 FROM grdb_migrations WHERE identifier = 'v1'"), true)
            }
            try store.close()
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }

    func testTheDirectoryIsOwnerOnlyAndTheDatabaseAndItsWALFilesTooWhateverTheUmask() async throws {
        let previous = umask(0)
        defer { umask(previous) }
        let store = try open()
        try await store.apply([.createUser(UserProfile(username: "ann", name: "Ann"), passwordHash: "x", at: 1)])
        XCTAssertEqual(try mode(of: directory.appendingPathComponent("data").path), 0o700)
        // The -wal and -shm files exist while the database is open.
        for file in [path, path + "-wal", path + "-shm"] { XCTAssertEqual(try mode(of: file), 0o600, file) }
        try store.close()
    }

    func testAnExistingWorldReadableDatabaseIsMadeOwnerOnly() async throws {
        let previous = umask(0)
        defer { umask(previous) }
        let first = try open()
        try await first.apply([.createUser(UserProfile(username: "ann", name: "Ann"), passwordHash: "x", at: 1)])
        try first.close()
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            XCTAssertEqual(chmod(file, 0o644), 0)
        }
        let store = try open()
        try await store.apply([.createUser(UserProfile(username: "bo", name: "Bo"), passwordHash: "x", at: 2)])
        for file in [path, path + "-wal", path + "-shm"] { XCTAssertEqual(try mode(of: file), 0o600, file) }
        try store.close()
    }

    private func mode(of path: String) throws -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return info.st_mode & 0o777
    }

    /// A fresh log is extended to the size it reaches before the automatic checkpoint, so that commits overwrite
    /// it instead of growing it (`WriteAheadLog`); a copy taken while the store is open, as a crash leaves it
    /// (committed frames not checkpointed, then zeros), opens with every committed write.
    func testTheLogStartsAtItsWorkingSizeAndTheZerosAfterItsFramesHideNoCommit() async throws {
        let store = try open()
        let working = WriteAheadLog.workingSize(pageSize: 4096, pages: 1000)
        XCTAssertEqual(try size(of: path + "-wal"), working)
        try await store.apply([.createUser(UserProfile(username: "ann", name: "Ann"), passwordHash: "x", at: 1)])
        try await store.apply([.createUser(UserProfile(username: "bo", name: "Bo"), passwordHash: "x", at: 2)])
        XCTAssertEqual(try size(of: path + "-wal"), working)  // overwritten, not grown
        let crashed = directory.appendingPathComponent("crashed/relay.sqlite").path
        try FileManager.default.createDirectory(atPath: directory.appendingPathComponent("crashed").path,
                                                withIntermediateDirectories: true)
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: crashed + suffix) }
        try store.close()
        let recovered = try SQLiteStore(path: crashed)
        defer { try? recovered.close() }
        let state = try await recovered.load()
        XCTAssertEqual(state.users.map(\.username), ["ann", "bo"])
    }

    private func size(of path: String) throws -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return Int(info.st_size)
    }

    func testInMemoryStore() async throws {
        let store = try SQLiteStore.inMemory()
        try await store.apply([
            .createUser(UserProfile(username: "alice", name: "Alice"), passwordHash: "hash-alice", at: 1_000),
            .createUser(UserProfile(username: "bob", name: "Bob"), passwordHash: "hash-bob", at: 1_001),
        ])
        try await store.apply([.addFriendship("bob", "alice", at: 5), .lastSeen(username: "bob", at: 9)])
        let state = try await store.load()
        XCTAssertEqual(state.users.map(\.username), ["alice", "bob"])
        XCTAssertEqual(state.friendships.map { "\($0.0)|\($0.1)" }, ["alice|bob"])
        XCTAssertEqual(state.lastSeen, ["bob": 9])
        let value13 = try await store.passwordHash(of: "bob")
        XCTAssertEqual(value13, "hash-bob")
    }

    /// Free text is stored as BLOB since NUL had to survive (see ExactText); rows written as TEXT before
    /// that change read the same as before.
    func testRowsWrittenAsTextStillRead() async throws {
        let store = try open()
        try await store.apply([.createUser(UserProfile(username: "zed", name: "Z\u{0}ed"), passwordHash: "h", at: 12)])
        try store.inspect { db in
            try db.execute(sql: "INSERT INTO users (username, name, password_hash, created_at) VALUES ('old', 'Old Name', 'h', 13)")
        }
        try store.close()
        let reopened = try open()
        defer { try? reopened.close() }
        let state = try await reopened.load()
        XCTAssertEqual(state.users.first { $0.username == "zed" }?.name, "Z\u{0}ed")
        XCTAssertEqual(state.users.first { $0.username == "old" }?.name, "Old Name")
    }
}
