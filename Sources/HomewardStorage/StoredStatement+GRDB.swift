import Foundation
import GRDB
import HomewardCore

extension StoredStatement {
    /// Runs the statement in the caller's transaction, compiled once per connection and kept (GRDB's statement
    /// cache): compiling, not running, was most of a small write's time. Every text the cache sees is fixed (a
    /// multi-row insert runs as its one-row statement, once per row), so it holds a bounded set of statements.
    func execute(in db: Database) throws {
        guard let row = eachRow else {
            return try db.cachedStatement(sql: sql).execute(arguments: Self.bound(arguments[...]))
        }
        let statement = try db.cachedStatement(sql: row.sql)
        for start in stride(from: 0, to: arguments.count, by: row.width) {
            try statement.execute(arguments: Self.bound(arguments[start..<start + row.width]))
        }
    }

    private static func bound(_ values: ArraySlice<StoredValue>) -> StatementArguments {
        StatementArguments(values.map(\.databaseValue))
    }
}

extension StoredValue {
    /// How SQLite stores the value: free text as a BLOB of its UTF-8 (`ExactText`), a Bool as 0 or 1.
    var databaseValue: DatabaseValue {
        switch self {
        case .text(let text): text.databaseValue
        case .freeText(let text): ExactText.blob(text).databaseValue
        case .int(let int): int.databaseValue
        case .double(let double): double.databaseValue
        case .bool(let bool): bool.databaseValue
        case .bytes(let bytes): Data(bytes).databaseValue
        case .null: .null
        }
    }
}
