import Foundation

/// One SQL statement of a stored change, in the SQL that SQLite and PostgreSQL share, with `?` for each
/// argument in order. A store only binds it (`StoreChange.statements(at:)` writes every statement once).
///
/// The SQL uses only what both dialects mean the same way: `INSERT ... ON CONFLICT (...) DO NOTHING` /
/// `DO UPDATE SET c = excluded.c`, multi-row `VALUES`, `UPDATE`, `DELETE` with subqueries. It contains no
/// `?` other than the placeholders (PostgreSQL replaces each with a typed read of its argument: `PostgresBatch`).
public struct StoredStatement: Sendable, Equatable {
    public let sql: String
    public let arguments: [StoredValue]
    /// For a multi-row insert, the same insert of one row; nil for any other statement. SQLite runs it once per
    /// row (`arguments` in rows of `EachRow.width`), compiled once for all, instead of compiling `sql`, whose text
    /// changes with the number of rows; PostgreSQL runs `sql`, one statement for all its rows.
    public let eachRow: EachRow?

    /// A multi-row insert's statement for one row, and how many of the arguments each row binds.
    public struct EachRow: Sendable, Equatable {
        public let sql: String
        public let width: Int
    }

    public init(_ sql: String, _ arguments: [StoredValue], eachRow: EachRow? = nil) {
        self.sql = sql
        self.arguments = arguments
        self.eachRow = eachRow
    }

    /// Arguments per statement at most, below SQLite's limit (32766 by default), so that rows of any number go
    /// in few statements. (PostgreSQL takes a statement's arguments as one JSON parameter, with no such limit.)
    static let argumentLimit = 10_000

    /// `rows` into `table` in as few statements as fit `argumentLimit` (none when there are no rows);
    /// `suffix` follows each (an `ON CONFLICT` clause).
    static func insert(into table: String, _ columns: [String], rows: [[StoredValue]], suffix: String = "") -> [StoredStatement] {
        let perStatement = max(1, argumentLimit / columns.count)
        let row = "(" + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        let head = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES "
        let tail = suffix.isEmpty ? "" : " " + suffix
        let eachRow = EachRow(sql: head + row + tail, width: columns.count)
        return stride(from: 0, to: rows.count, by: perStatement).map { start in
            let chunk = rows[start..<min(start + perStatement, rows.count)]
            let values = Array(repeating: row, count: chunk.count).joined(separator: ", ")
            return StoredStatement(head + values + tail, chunk.flatMap { $0 }, eachRow: eachRow)
        }
    }

    /// Strings stored as TEXT that contain NUL: neither store can keep or compare them whole (SQLite reads
    /// C strings; PostgreSQL's TEXT refuses NUL), so a store refuses the batch that holds one.
    public var textWithNUL: String? {
        for argument in arguments {
            switch argument {
            case .text(let text) where text.utf8.contains(0): return text
            case .textList(let list): if let text = list.first(where: { $0.utf8.contains(0) }) { return text }
            default: continue
            }
        }
        return nil
    }
}

extension Array where Element == StoreChange {
    /// Every statement of these changes, in order, for one transaction; `StoreKeyError` (nothing to run)
    /// when one would store a string with NUL as TEXT. Both stores run their batches through this, so
    /// they refuse the same batches.
    public func statements(at now: Int64 = StoredStatement.wallClockMillis()) throws(StoreKeyError) -> [StoredStatement] {
        let statements = flatMap { $0.statements(at: now) }
        if let text = statements.lazy.compactMap(\.textWithNUL).first { throw StoreKeyError(key: text) }
        return statements
    }
}

extension StoredStatement {
    /// Milliseconds since 1970 by the wall clock: the time a first seen acknowledgement is stored with.
    public static func wallClockMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}

/// A value a stored change writes, as each store binds it.
public enum StoredValue: Sendable, Equatable {
    /// A string stored as TEXT: usernames, ids, token hashes, endpoints, names of states. It must not
    /// contain NUL (`StoredStatement.textWithNUL`).
    case text(String)
    /// Free text a user wrote (display names, notes, alarm texts, reasons, messages): stored as its UTF-8
    /// bytes (SQLite BLOB, PostgreSQL BYTEA), which both keep whole, NUL included; both loaders read it
    /// back as a string.
    case freeText(String)
    case int(Int64)
    case double(Double)
    /// SQLite stores 0 or 1; PostgreSQL a BOOLEAN.
    case bool(Bool)
    case bytes([UInt8])
    case null
    /// Strings as TEXT, read as a table of one column, `value`: a read writes `(SELECT value FROM ?)` for it
    /// (`StoredState.Read`: the users a slice concerns). SQLite reads it with `json_each`, PostgreSQL with
    /// `jsonb_array_elements_text`, each from one JSON array bound once. For reads only; no write stores one.
    case textList([String])

    public init(_ value: Int64?) { self = value.map(Self.int) ?? .null }
    public init(_ value: Double?) { self = value.map(Self.double) ?? .null }
    public init(text: String?) { self = text.map(Self.text) ?? .null }
    public init(freeText: String?) { self = freeText.map(Self.freeText) ?? .null }
}
