import Foundation
import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
import HomewardTestSupport
import Logging
import PostgresNIO
import Testing

/// What only the PostgreSQL store has: its migrations table, its column types, and its deadlines.
/// Everything a store must do is in `StoreContractTests`.
@Suite(.postgresServer)
struct PostgresStoreTests {
    private static let logger = Logger(label: "homeward.test.postgres")

    @Test func migrationsAreRecordedOnceAndTheSchemaHoldsTextExactly() async throws {
        let server = try PostgresServer.requireCurrent()
        let location = try server.createDatabase()
        let subject = PostgresSubject(location: location, server: server)
        defer { Task { await subject.remove() } }
        try await subject.close(try await subject.open())
        let store = try await subject.open()  // opening again applies nothing twice
        #expect(try await subject.strings(store, "SELECT version FROM schema_migrations ORDER BY version") == ["v1", "v10-active-indexes", "v2-shares", "v3-push", "v4-friends-map", "v5-secrets", "v6-push-sign-ins", "v7-user-versions", "v8-write-function", "v9-slice-indexes"])

        // Integers are BIGINT, free text BYTEA, keys TEXT in code-point order; nothing is INTEGER.
        let columns = try await subject.strings(store, """
            SELECT table_name || '.' || column_name || ' ' || data_type || COALESCE(' ' || collation_name, '')
            FROM information_schema.columns
            WHERE table_schema = 'public' AND table_name <> 'schema_migrations'
            ORDER BY 1
            """)
        #expect(columns.contains("users.created_at bigint"))
        #expect(columns.contains("alarms.text bytea"))
        #expect(columns.contains("sessions.note bytea"))
        #expect(columns.contains("users.name bytea"))
        #expect(columns.contains("users.username text C"))
        #expect(!columns.contains { $0.contains(" integer") }, "\(columns)")
        #expect(!columns.contains { $0.hasSuffix(" text") && !$0.hasPrefix("users.password_hash") && !$0.hasPrefix("session_invitees.state") },
                "every other TEXT column is a key with the C collation: \(columns)")
        try await subject.close(store)
    }

    /// A server that accepts the TCP connection and then never answers: opening fails at the deadline.
    @Test func openingAgainstAServerThatNeverAnswersTimesOut() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let location = PostgresLocation(host: "127.0.0.1", port: silent.port, username: "u", database: "d", tls: .disable)
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresStore.open(location, timeouts: .init(connect: .milliseconds(500), query: .milliseconds(500)),
                                             logger: Self.logger)
        }
        // Without the deadlines it would wait forever; the bound is loose, since a machine busy with other
        // builds can take seconds to schedule the timeouts (this is not a measurement of their precision).
        #expect(clock.now - started < .seconds(15))
        #expect(error.map { "\($0)" }?.hasPrefix("cannot connect to PostgreSQL at 127.0.0.1:\(silent.port): timed out") == true)
    }

    /// The relay's batches go through `startWithConnection` (`applyChecked(_:scope:completion:)`). A query that
    /// outlives the store timeout (the server's own statement timeout switched off, so that only the store's deadline
    /// can end it) is answered with the timeout, and its result, when it comes, is dropped.
    @Test func aQueryThatOutlivesTheStoreTimeoutIsAnsweredAtTheDeadlineAndItsLateResultIsDropped() async throws {
        let server = try PostgresServer.requireCurrent()
        let store = try await PostgresStore.open(try server.createDatabase(),
                                                 timeouts: .init(connect: .seconds(10), query: .milliseconds(500)), logger: Self.logger)
        let answers = Answers<String>()
        let clock = ContinuousClock()
        let started = clock.now
        let work = store.startWithConnection("sleep", { db, logger in
            _ = try await db.query("SET statement_timeout = 0", logger: logger).collect()
            _ = try await db.query("SELECT pg_sleep(5)", logger: logger).collect()
            return "late"
        }, completion: answers.record)
        let first = try await withTimeout(15, "the store's answer") { await answers.first() }
        let waited = clock.now - started
        #expect(first.isTimeout, "\(first)")
        #expect(waited >= .milliseconds(500))
        #expect(waited < .seconds(4), "answered at the deadline, not when the query ended")
        await work.value
        #expect(answers.count == 1, "the query's result after the deadline reaches nobody")
        await store.close()
    }

    @Test func aStoreAfterCloseFailsInsteadOfWaiting() async throws {
        let server = try PostgresServer.requireCurrent()
        let store = try await PostgresStore.open(try server.createDatabase(),
                                                 timeouts: .init(connect: .seconds(10), query: .seconds(10)), logger: Self.logger)
        await store.close()
        let clock = ContinuousClock()
        let started = clock.now
        await #expect(throws: PostgresStoreError.self) { _ = try await store.load() }
        #expect(clock.now - started < .seconds(3), "a closed pool refuses at once, without waiting for the 10 s deadline")
    }
}

/// A loopback socket that listens and never accepts: the kernel completes TCP handshakes, nobody speaks.
private final class SilentListener: Sendable {
    let port: Int
    private let socket: Int32

    init() throws {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(socket, generic, length) == 0 && listen(socket, 16) == 0 && getsockname(socket, generic, &length) == 0
            }
        }
        guard listening else {
            _ = Foundation.close(socket)
            throw TestFailure("cannot listen on 127.0.0.1")
        }
        self.socket = socket
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Foundation.close(socket) }
}

/// `--store` URLs: what is accepted, and that every mistake is named (and no password is echoed).
struct PostgresLocationTests {
    @Test func aFullURLIsParsed() throws {
        let location = try PostgresLocation(url: "postgres://homeward:s%40cret%3A1@db.example.org:6543/relay?sslmode=require")
        #expect(location == PostgresLocation(host: "db.example.org", port: 6543, username: "homeward", password: "s@cret:1",
                                             database: "relay", tls: .require))
        #expect(location.description == "postgres://homeward:***@db.example.org:6543/relay?sslmode=require")
    }

    @Test func thePortDefaultsTo5432AndThePasswordIsOptional() throws {
        let location = try PostgresLocation(url: "postgresql://relay@localhost/homeward")
        #expect(location == PostgresLocation(host: "localhost", username: "relay", database: "homeward"))
    }

    @Test(arguments: [
        ("postgres://db.example.org:5432/relay", "no user"),
        ("postgres://u:p@:5432/relay", "no host"),
        ("postgres://u:p@db:5432/", "no database"),
        ("postgres://u:p@db:5432", "no database"),
        ("postgres://u:p@db:5432/a/b", "no database"),
        ("postgres://u:p@db:0/relay", "port"),
        ("postgres://u:p@db/relay?sslmode=verify-full", "sslmode must be"),
        ("postgres://u:p@db/relay?pool=3", "unknown parameter 'pool'"),
        ("mysql://u:p@db/relay", "postgres://"),
        ("postgres://u:p@db/relay#x", "fragment"),
    ])
    func badURLsSayWhatIsWrong(url: String, reason: String) {
        do {
            let location = try PostgresLocation(url: url)
            Issue.record("accepted \(url) as \(location)")
        } catch {
            #expect(error.description.contains(reason), "\(error)")
            #expect(!error.description.contains(":p@"), "the password is masked: \(error)")
        }
    }
}
