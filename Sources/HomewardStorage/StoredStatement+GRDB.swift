import Foundation
import GRDB
import HomewardCore
import HomewardProtocol

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

    /// The rows of a read, in the caller's read.
    func fetchAll(in db: Database) throws -> [Row] {
        let (sql, arguments) = sqlite
        return try Row.fetchAll(db, sql: sql, arguments: arguments)
    }

    /// The statement as SQLite runs it: a list (`StoredValue.textList`) is read as a table with `json_each` of its
    /// JSON text (whose column is `value`), every other placeholder bound as it is.
    private var sqlite: (sql: String, arguments: StatementArguments) {
        let values = arguments.map(\.databaseValue)
        guard arguments.contains(where: { if case .textList = $0 { true } else { false } }) else {
            return (sql, StatementArguments(values))
        }
        var rendered = ""
        var index = 0
        for character in sql {
            guard character == "?" else { rendered.append(character); continue }
            if case .textList = arguments[index] { rendered += "json_each(?)" } else { rendered += "?" }
            index += 1
        }
        return (rendered, StatementArguments(values))
    }
}

extension StoredValue {
    /// How SQLite stores the value: free text as a BLOB of its UTF-8 (`ExactText`), a Bool as 0 or 1, a list as
    /// the text of a JSON array.
    var databaseValue: DatabaseValue {
        switch self {
        case .text(let text): text.databaseValue
        case .freeText(let text): ExactText.blob(text).databaseValue
        case .int(let int): int.databaseValue
        case .double(let double): double.databaseValue
        case .bool(let bool): bool.databaseValue
        case .bytes(let bytes): Data(bytes).databaseValue
        case .null: .null
        case .textList(let list): JSONWriter.string(.array(list.map(JSONValue.string))).databaseValue
        }
    }
}
