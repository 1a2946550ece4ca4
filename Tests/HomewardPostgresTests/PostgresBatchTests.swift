import Foundation
import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
import HomewardProtocol
import Testing

/// A PostgreSQL write is one call with its statements' values as JSON (`PostgresBatch`): values must never
/// become SQL, and must reach the server exactly.
struct PostgresBatchTests {
    static let hostile = "O'Brien\"; DROP TABLE users; -- \\ \n\t\u{1}\u{7F} é 😀"

    @Test func anInterpolatedValueIsReadFromTheParameterNeverWrittenIntoTheSQL() {
        let id = Self.hostile
        let statement: PostgresBatchStatement = "DELETE FROM shares WHERE id = \(id) AND created_at < \(Int64(5))"
        #expect(statement.sql == "DELETE FROM shares WHERE id = ($1->>0) AND created_at < (($1->>1)::int8)")
        #expect(statement.values == [.text(id), .integer(5)])
    }

    @Test func everyStatementGetsItsOwnArrayOfValues() throws {
        var batch = PostgresBatch()
        batch.append("DELETE FROM tokens WHERE hash = \(Self.hostile)")
        batch.append("DELETE FROM blocks")
        batch.append("UPDATE users SET last_seen = \(Int64.max) WHERE username = \(Optional<String>.none)")
        let decoded = try JSONSerialization.jsonObject(with: Data(batch.argumentsJSON.utf8)) as? [[Any]]
        #expect(decoded?.count == 3)
        #expect(decoded?[0].first as? String == Self.hostile)
        #expect(decoded?[1].isEmpty == true)
        #expect((decoded?[2].first as? NSNumber)?.int64Value == Int64.max)
        #expect(decoded?[2].last is NSNull)
    }

    @Test func doublesTravelAsTextPostgreSQLReadsBackExactly() {
        #expect(PostgresBatchValue.float8Text(0.1) == "0.1")
        #expect(PostgresBatchValue.float8Text(.nan) == "NaN")
        #expect(PostgresBatchValue.float8Text(-.infinity) == "-Infinity")
        #expect(Double(PostgresBatchValue.float8Text(-122.41941550000001)) == -122.41941550000001)
    }

}

@Suite(.postgresServer)
struct PostgresBatchServerTests {
    private static let hostile = PostgresBatchTests.hostile

    @Test func textBytesAndCoordinatesReachTheServerExactly() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        let store = try await subject.open()
        let position = Position(lat: 0.1 + 0.2, lon: -122.41941550000001, acc: 1e-300, alt: -0.0, spd: .greatestFiniteMagnitude,
                                ts: Int64.max)
        let alarm = Alarm(id: "a_1", owner: "bob", text: Self.hostile, position: position, createdAt: Int64.min, recipients: ["alice"])
        try await store.apply([
            .createUser(UserProfile(username: "bob", name: Self.hostile), passwordHash: Self.hostile, at: 1),
            .saveAlarm(alarm),
        ])
        #expect(try await store.passwordHash(of: "bob") == Self.hostile)
        try await subject.close(store)
        let reopened = try await subject.open()
        let state = try await reopened.load()
        #expect(state.users == [UserProfile(username: "bob", name: Self.hostile)])
        #expect(state.alarms.first?.text == Self.hostile)
        #expect(state.alarms.first?.position == position)
        #expect(state.alarms.first?.createdAt == Int64.min)
        try await subject.close(reopened)
    }
}
