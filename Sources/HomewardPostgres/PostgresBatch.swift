import Foundation
import HomewardCore

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
        var sql = ""
        sql.reserveCapacity(statement.sql.utf8.count + statement.arguments.count * 16)
        var json = "["
        var index = 0
        for character in statement.sql {
            guard character == "?" else { sql.append(character); continue }
            precondition(index < statement.arguments.count, "a stored statement binds one argument per placeholder")
            let argument = statement.arguments[index]
            sql += argument.postgresRead(index)
            if index > 0 { json += "," }
            argument.appendJSON(to: &json)
            index += 1
        }
        precondition(index == statement.arguments.count, "a stored statement binds one argument per placeholder")
        statements.append(sql)
        arguments.append(json + "]")
    }

    /// The arguments of every statement as one JSON array of arrays, the function's `arguments` parameter.
    var argumentsJSON: String { "[" + arguments.joined(separator: ",") + "]" }
}

extension StoredValue {
    /// The one place a stored value becomes PostgreSQL's: the expression that reads argument `index` of the
    /// statement's JSON parameter with the column's type. Free text and bytes travel as base64 and become
    /// BYTEA (TEXT cannot hold NUL, nor can JSON text PostgreSQL parses); NULL is written as NULL, untyped, so
    /// that the server takes the column's type.
    func postgresRead(_ index: Int) -> String {
        switch self {
        case .text: "($1->>\(index))"
        case .freeText, .bytes: "decode($1->>\(index), 'base64')"
        case .int: "($1->>\(index))::int8"
        case .double: "($1->>\(index))::float8"
        case .bool: "($1->>\(index))::boolean"
        case .null: "NULL"
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
