import Foundation
import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
import HomewardProtocol
import Testing

/// A PostgreSQL write is one call with its statements' arguments as JSON (`PostgresBatch`): arguments must never
/// become SQL, and must reach the server exactly.
struct PostgresBatchTests {
    static let hostile = "O'Brien\"; DROP TABLE users; -- \\ \n\t\u{1}\u{7F} é 😀"

    @Test func anArgumentIsReadFromTheParameterNeverWrittenIntoTheSQL() throws {
        let batch = PostgresBatch([StoredStatement("DELETE FROM shares WHERE id = ? AND created_at < ? AND note = ?",
                                                   [.text(Self.hostile), .int(5), .null])])
        #expect(batch.statements == ["DELETE FROM shares WHERE id = ($1->>0) AND created_at < ($1->>1)::int8 AND note = NULL"])
        let decoded = try JSONSerialization.jsonObject(with: Data(batch.argumentsJSON.utf8)) as? [[Any]]
        #expect(decoded?.first?.first as? String == Self.hostile, "the text is one JSON string, escaped whole")
    }

    @Test func everyStatementGetsItsOwnArrayOfArguments() throws {
        let batch = PostgresBatch([
            StoredStatement("DELETE FROM tokens WHERE hash = ?", [.text(Self.hostile)]),
            StoredStatement("DELETE FROM blocks", []),
            StoredStatement("UPDATE users SET last_seen = ?, name = ? WHERE username = ?", [.int(.max), .freeText("\u{0}x"), .null]),
        ])
        let decoded = try JSONSerialization.jsonObject(with: Data(batch.argumentsJSON.utf8)) as? [[Any]]
        #expect(decoded?.count == 3)
        #expect(decoded?[0].first as? String == Self.hostile)
        #expect(decoded?[1].isEmpty == true)
        #expect((decoded?[2].first as? NSNumber)?.int64Value == Int64.max)
        #expect(decoded?[2][1] as? String == Data("\u{0}x".utf8).base64EncodedString(), "free text travels as bytes, NUL included")
        #expect(decoded?[2].last is NSNull)
    }

    @Test func doublesTravelAsTextPostgreSQLReadsBackExactly() {
        #expect(StoredValue.float8Text(0.1) == "0.1")
        #expect(StoredValue.float8Text(.nan) == "NaN")
        #expect(StoredValue.float8Text(-.infinity) == "-Infinity")
        #expect(Double(StoredValue.float8Text(-122.41941550000001)) == -122.41941550000001)
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
        let alarm = Alarm(id: "a_1", owner: "bob", text: Self.hostile + "\u{0}", position: position, createdAt: Int64.min,
                          recipients: ["alice"])
        try await store.apply([
            .createUser(UserProfile(username: "bob", name: Self.hostile), passwordHash: Self.hostile, at: 1),
            .saveAlarm(alarm),
        ])
        #expect(try await store.passwordHash(of: "bob") == Self.hostile)
        try await subject.close(store)
        let reopened = try await subject.open()
        let state = try await reopened.load()
        #expect(state.users == [UserProfile(username: "bob", name: Self.hostile)])
        #expect(state.alarms.first?.text == Self.hostile + "\u{0}")
        #expect(state.alarms.first?.position == position)
        #expect(state.alarms.first?.createdAt == Int64.min)
        try await subject.close(reopened)
    }
}
