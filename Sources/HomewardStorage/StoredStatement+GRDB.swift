import Foundation
import GRDB
import HomewardCore

extension StoredStatement {
    /// Runs the statement in the caller's transaction.
    func execute(in db: Database) throws {
        try db.execute(sql: sql, arguments: StatementArguments(arguments.map(\.databaseValue)))
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
