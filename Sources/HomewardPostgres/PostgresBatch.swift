import Foundation
import HomewardCore
import PostgresNIO

/// The statements of one write, sent to PostgreSQL in one call (`homeward_write`, see `PostgresSchema`) rather
/// than one round trip each: a relay's batch costs one round trip to a distant server however many statements
/// it holds.
///
/// A statement's arguments travel as one JSON array, which the function hands to the statement as its only
/// parameter `$1`; each `?` of the shared SQL (`StoredStatement`) becomes the expression that reads its argument
/// back with its type (`($1->>0)::int8`), so no value is ever part of the SQL text.
struct PostgresBatch: Sendable {
    private(set) var statements: [String] = []
    /// Each statement's arguments as a JSON array, in the statements' order.
    private var arguments: [String] = []

    init(_ stored: [StoredStatement] = []) {
        for statement in stored { append(statement) }
    }

    var isEmpty: Bool { statements.isEmpty }

    mutating func append(_ statement: StoredStatement) {
        let rendered = PostgresStatement(statement)
        statements.append(rendered.sql)
        arguments.append(rendered.argumentsJSON)
    }

    /// The arguments of every statement as one JSON array of arrays, the function's `arguments` parameter.
    var argumentsJSON: String { "[" + arguments.joined(separator: ",") + "]" }
}

/// A shared statement as PostgreSQL runs it: each `?` replaced by the typed read of its argument from the
/// statement's one JSON parameter (`StoredValue.postgresRead`), and the arguments as that JSON array. In a batch
/// the parameter is what `homeward_write` hands each statement; a statement run as a query of its own
/// (`PostgresQuery(stored:)`) binds it.
struct PostgresStatement: Sendable {
    let sql: String
    let argumentsJSON: String

    /// `parameter` is the expression of the JSON parameter in the SQL.
    init(_ statement: StoredStatement, parameter: String = "$1") {
        var sql = ""
        sql.reserveCapacity(statement.sql.utf8.count + statement.arguments.count * 16)
        var json = "["
        var index = 0
        // The text between placeholders is copied a run at a time, found in its UTF-8 bytes (`?` is one byte and
        // never part of another character's): walking it as `Character`s, with grapheme breaking at each one, cost
        // a relay more than the rest of building its batch.
        let text = statement.sql.utf8
        var runStart = text.startIndex
        for position in text.indices where text[position] == UInt8(ascii: "?") {
            precondition(index < statement.arguments.count, "a stored statement binds one argument per placeholder")
            sql += statement.sql[runStart..<position]
            let argument = statement.arguments[index]
            sql += argument.postgresRead(index, from: parameter)
            if index > 0 { json += "," }
            argument.appendJSON(to: &json)
            index += 1
            runStart = text.index(after: position)
        }
        precondition(index == statement.arguments.count, "a stored statement binds one argument per placeholder")
        sql += statement.sql[runStart...]
        self.sql = sql
        argumentsJSON = json + "]"
    }
}

extension PostgresQuery {
    /// A shared statement as a query of its own (the outbox's): its arguments bound as the one JSON parameter
    /// its reads take them from, as in a batch.
    init(stored statement: StoredStatement) {
        guard !statement.arguments.isEmpty else {
            self.init(unsafeSQL: statement.sql)
            return
        }
        let rendered = PostgresStatement(statement, parameter: "$1::jsonb")
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(rendered.argumentsJSON)
        self.init(unsafeSQL: rendered.sql, binds: bindings)
    }
}

extension StoredValue {
    /// The one place a stored value becomes PostgreSQL's: the expression that reads argument `index` of the
    /// statement's JSON parameter (`parameter`) with the column's type (a list: as the table it stands for). Free text and bytes travel as base64 and become
    /// BYTEA (TEXT cannot hold NUL, nor can JSON text PostgreSQL parses); NULL is written as NULL, untyped, so
    /// that the server takes the column's type.
    func postgresRead(_ index: Int, from parameter: String = "$1") -> String {
        switch self {
        case .text: "(\(parameter)->>\(index))"
        case .freeText, .bytes: "decode(\(parameter)->>\(index), 'base64')"
        case .int: "(\(parameter)->>\(index))::int8"
        case .double: "(\(parameter)->>\(index))::float8"
        case .bool: "(\(parameter)->>\(index))::boolean"
        case .null: "NULL"
        // A table of one column, `value`, as SQLite's `json_each` gives it.
        case .textList: "jsonb_array_elements_text(\(parameter)->\(index))"
        }
    }

    /// The value in the statement's JSON array.
    func appendJSON(to json: inout String) {
        switch self {
        case let .text(text): Self.appendJSONString(text, to: &json)
        case let .freeText(text): Self.appendJSONString(Data(text.utf8).base64EncodedString(), to: &json)
        case let .bytes(bytes): Self.appendJSONString(Data(bytes).base64EncodedString(), to: &json)
        case let .int(value): json += String(value)
        // As text: JSON numbers hold neither infinities nor NaN, and PostgreSQL reads Swift's shortest
        // round-trip form back to the same double.
        case let .double(value): Self.appendJSONString(Self.float8Text(value), to: &json)
        case let .bool(value): json += value ? "true" : "false"
        case .null: json += "null"
        case let .textList(list):
            json += "["
            for (position, text) in list.enumerated() {
                if position > 0 { json += "," }
                Self.appendJSONString(text, to: &json)
            }
            json += "]"
        }
    }

    static func float8Text(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return "\(value)"
    }

    /// A JSON string: quote, backslash and control characters escaped, everything else as it is (UTF-8).
    static func appendJSONString(_ text: String, to json: inout String) {
        json += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case "\n": json += "\\n"
            case "\r": json += "\\r"
            case "\t": json += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                json += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: json.unicodeScalars.append(scalar)
            }
        }
        json += "\""
    }
}
