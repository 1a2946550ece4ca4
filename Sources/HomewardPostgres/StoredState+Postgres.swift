import Foundation
import HomewardCore
import Logging
import PostgresNIO

extension StoredState {
    /// Reads everything the relay keeps in memory (`StoredState.Read`, the SQLite store's rows in the same
    /// order), inside the caller's transaction, which makes the reads consistent (`PostgresStore.load`:
    /// REPEATABLE READ, one snapshot).
    /// With `users`, only what concerns them (a slice, `PostgresStore.loadSlice`).
    init(db: PostgresConnection, concerning users: [String]? = nil, logger: Logger) async throws {
        try await self.init(db: db, statements: { $0.statement(concerning: users) }, logger: logger)
    }

    /// Reads what a cache of connected users starts from (`PostgresStore.loadActive`), inside the caller's transaction.
    init(activeRowsIn db: PostgresConnection, logger: Logger) async throws {
        try await self.init(db: db, statements: \.activeStatement, logger: logger)
    }

    /// Runs each read's statement (none for a read whose statement is nil) and decodes the rows.
    private init(db: PostgresConnection, statements: (Read) -> StoredStatement?, logger: Logger) async throws {
        var results: [Read: [PostgresRandomAccessRow]] = [:]
        for read in Read.allCases {
            guard let statement = statements(read) else { continue }
            results[read] = try await db.query(PostgresQuery(stored: statement), logger: logger).collect()
                .map(PostgresRandomAccessRow.init)
        }
        try self.init(rows: { results[$0] ?? [] })
    }
}

/// PostgreSQL's columns as the shared readers decode them: free text is BYTEA (TEXT cannot hold NUL), read
/// as UTF-8; a boolean is BOOLEAN.
extension PostgresRandomAccessRow: StoredRow {
    public func isNull(_ column: Int) -> Bool { self[column].bytes == nil }
    public func text(_ column: Int) throws -> String { try self[column].decode(String.self) }
    public func freeText(_ column: Int) throws -> String { String(decoding: try self[column].decode(Data.self), as: UTF8.self) }
    public func int(_ column: Int) throws -> Int64 { try self[column].decode(Int64.self) }
    public func double(_ column: Int) throws -> Double { try self[column].decode(Double.self) }
    public func bool(_ column: Int) throws -> Bool { try self[column].decode(Bool.self) }
    public func bytes(_ column: Int) throws -> [UInt8] { [UInt8](try self[column].decode(Data.self)) }
    public static func unreadable(_ reason: String) -> any Error { PostgresStoreError.failed(operation: "load", reason: reason) }
}
