import Foundation
import HomewardCore
import Logging
import PostgresNIO

extension StoredStatement {
    /// Runs the statement in the caller's transaction.
    func execute(on db: PostgresConnection, logger: Logger) async throws {
        try await db.query(try postgresQuery(), logger: logger)
    }

    /// The statement as PostgreSQL takes it: each `?` numbered (`$1`, `$2`...), each argument bound.
    func postgresQuery() throws -> PostgresQuery {
        var sql = ""
        sql.reserveCapacity(self.sql.utf8.count + arguments.count * 2)
        var number = 0
        for character in self.sql {
            guard character == "?" else { sql.append(character); continue }
            number += 1
            sql += "$\(number)"
        }
        precondition(number == arguments.count, "a stored statement binds one argument per placeholder")
        var bindings = PostgresBindings(capacity: arguments.count)
        for argument in arguments { try argument.bind(to: &bindings) }
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }
}

extension StoredValue {
    /// The one place a stored value becomes a PostgreSQL parameter: free text as BYTEA (TEXT cannot hold
    /// NUL), a Bool as BOOLEAN, NULL untyped (the server takes the column's type).
    func bind(to bindings: inout PostgresBindings) throws {
        switch self {
        case .text(let text): bindings.append(text)
        case .freeText(let text): try bindings.append(Data(text.utf8))
        case .int(let int): bindings.append(int)
        case .double(let double): bindings.append(double)
        case .bool(let bool): bindings.append(bool)
        case .bytes(let bytes): try bindings.append(Data(bytes))
        case .null: bindings.appendNull()
        }
    }
}
