import Foundation

/// The statements of one write, sent to PostgreSQL in one call (`homeward_write`, see `PostgresSchema`) rather
/// than one round trip each: a relay's batch costs one round trip to a distant server however many statements
/// it holds.
///
/// A statement's values travel as one JSON array, which the function hands to the statement as its only
/// parameter `$1`; an interpolated value becomes the expression that reads it back with its type
/// (`($1->>0)::int8`), so statements are written as with `PostgresQuery`, and no value is ever part of the
/// SQL text.
struct PostgresBatch: Sendable {
    private(set) var statements: [String] = []
    private(set) var arguments: [[PostgresBatchValue]] = []

    var isEmpty: Bool { statements.isEmpty }

    mutating func append(_ statement: PostgresBatchStatement) {
        statements.append(statement.sql)
        arguments.append(statement.values)
    }

    /// The arguments of every statement as one JSON array of arrays, the function's `arguments` parameter.
    var argumentsJSON: String {
        var json = "["
        for (index, values) in arguments.enumerated() {
            if index > 0 { json += "," }
            json += "["
            for (position, value) in values.enumerated() {
                if position > 0 { json += "," }
                value.appendJSON(to: &json)
            }
            json += "]"
        }
        return json + "]"
    }
}

/// One value of a batch statement, as JSON.
enum PostgresBatchValue: Sendable, Equatable {
    case null
    case text(String)
    case integer(Int64)
    case double(Double)
    case boolean(Bool)
    /// Bytes as base64 (JSON has no bytes; PostgreSQL decodes them back).
    case bytes(Data)
    case texts([String])
    case integers([Int64])

    func appendJSON(to json: inout String) {
        switch self {
        case .null: json += "null"
        case let .text(text): Self.appendString(text, to: &json)
        case let .integer(value): json += String(value)
        // As text: JSON numbers hold neither infinities nor NaN, and PostgreSQL reads Swift's shortest round-trip
        // form back to the same double.
        case let .double(value): Self.appendString(Self.float8Text(value), to: &json)
        case let .boolean(value): json += value ? "true" : "false"
        case let .bytes(data): Self.appendString(data.base64EncodedString(), to: &json)
        case let .texts(texts):
            json += "["
            for (index, text) in texts.enumerated() {
                if index > 0 { json += "," }
                Self.appendString(text, to: &json)
            }
            json += "]"
        case let .integers(values):
            json += "[" + values.map { String($0) }.joined(separator: ",") + "]"
        }
    }

    static func float8Text(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return "\(value)"
    }

    /// A JSON string: quote, backslash and control characters escaped, everything else as it is (UTF-8).
    static func appendString(_ text: String, to json: inout String) {
        json += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case "\n": json += "\\n"
            case "\r": json += "\\r"
            case "\t": json += "\\t"
            case _ where scalar.value < 0x20:
                json += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: json.unicodeScalars.append(scalar)
            }
        }
        json += "\""
    }
}

/// SQL text whose interpolated values become typed reads of the statement's JSON parameter.
struct PostgresBatchStatement: Sendable, ExpressibleByStringInterpolation {
    let sql: String
    let values: [PostgresBatchValue]

    init(stringLiteral value: String) {
        sql = value
        values = []
    }

    init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        values = stringInterpolation.values
    }

    struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var values: [PostgresBatchValue] = []

        init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        mutating func appendLiteral(_ literal: String) { sql += literal }

        /// Appends the value and the expression that reads it from slot `k` of `$1`: `$1->>k` is the slot as text
        /// (NULL for JSON null), `$1->k` as JSON.
        private mutating func append(_ value: PostgresBatchValue, read: (Int) -> String) {
            sql += "(" + read(values.count) + ")"
            values.append(value)
        }

        mutating func appendInterpolation(_ text: String) { append(.text(text)) { "$1->>\($0)" } }
        mutating func appendInterpolation(_ text: String?) { append(text.map(PostgresBatchValue.text) ?? .null) { "$1->>\($0)" } }
        mutating func appendInterpolation(_ value: Int64) { append(.integer(value)) { "($1->>\($0))::int8" } }
        mutating func appendInterpolation(_ value: Int64?) {
            append(value.map(PostgresBatchValue.integer) ?? .null) { "($1->>\($0))::int8" }
        }
        mutating func appendInterpolation(_ value: Double?) {
            append(value.map(PostgresBatchValue.double) ?? .null) { "($1->>\($0))::float8" }
        }
        mutating func appendInterpolation(_ value: Bool) { append(.boolean(value)) { "($1->>\($0))::boolean" } }
        mutating func appendInterpolation(_ data: Data?) {
            append(data.map(PostgresBatchValue.bytes) ?? .null) { "decode($1->>\($0), 'base64')" }
        }
        mutating func appendInterpolation(_ texts: [String]) {
            append(.texts(texts)) { "ARRAY(SELECT jsonb_array_elements_text($1->\($0)))" }
        }
        mutating func appendInterpolation(_ values: [Int64]) {
            append(.integers(values)) { "ARRAY(SELECT jsonb_array_elements_text($1->\($0))::int8)" }
        }
    }
}
