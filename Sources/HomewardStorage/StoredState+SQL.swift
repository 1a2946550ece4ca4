import Foundation
import GRDB
import HomewardCore

extension StoredState {
    /// Reads everything the relay keeps in memory (`StoredState.Read`), or with `users` only what concerns them (a
    /// slice), inside the caller's read, which makes the reads one snapshot.
    init(db: Database, concerning users: [String]? = nil) throws {
        try self.init(rows: { try $0.statement(concerning: users).fetchAll(in: db) })
    }

    /// Reads what a cache of connected users starts from (`RelayStore.loadActive`), inside the caller's read.
    init(activeRowsIn db: Database) throws {
        try self.init(rows: { try $0.activeStatement?.fetchAll(in: db) ?? [] })
    }
}

/// SQLite's columns as the shared readers decode them: free text is a BLOB (or TEXT written before), which
/// GRDB decodes from its UTF-8 (`ExactText`); a boolean is 0 or 1.
extension Row: StoredRow {
    public func isNull(_ column: Int) -> Bool { hasNull(atIndex: column) }
    public func text(_ column: Int) -> String { self[column] }
    public func freeText(_ column: Int) -> String { self[column] }
    public func int(_ column: Int) -> Int64 { self[column] }
    public func double(_ column: Int) -> Double { self[column] }
    public func bool(_ column: Int) -> Bool { self[column] }
    public func bytes(_ column: Int) -> [UInt8] { [UInt8](self[column] as Data) }
    public static func unreadable(_ reason: String) -> any Error { DatabaseError(message: reason) }
}
