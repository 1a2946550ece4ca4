import Foundation
import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
@testable import HomewardServer
import HomewardStorage
import HomewardTestSupport
import HomewardWebPush
import Logging
import Synchronization
import Testing

/// Which key a relay signs pushes with: on PostgreSQL one key for every relay, made by the first start;
/// `--vapid-key` still wins; on SQLite the data directory's file, as before.
@Suite(.postgresServer)
struct RelayVAPIDKeyTests {
    private static let storeName = "postgres://postgres@127.0.0.1/test"

    private func openPostgres(_ location: PostgresLocation) async throws -> PostgresStore {
        try await PostgresStore.open(location, timeouts: .init(connect: .seconds(10), query: .seconds(10)),
                                     logger: Logger(label: "homeward.test.postgres"))
    }

    private func load(path: String? = nil, _ directory: TemporaryDirectory, _ store: any RelayStore,
                      logger: Logger = Logger(label: "homeward.test")) async throws -> VAPIDKey {
        try await RelayVAPIDKey.load(path: path, dataDirectory: directory.path, store: store, storeName: Self.storeName,
                                     logger: logger)
    }

    @Test func relaysStartingTogetherOnOneDatabaseSignWithOneKeyAndLaterStartsKeepIt() async throws {
        let location = try PostgresServer.requireCurrent().createDatabase()
        let stores = try await [openPostgres(location), openPostgres(location), openPostgres(location)]
        let directories = (0..<3).map { _ in TemporaryDirectory() }
        defer { directories.forEach { $0.remove() } }
        let keys = try await withThrowingTaskGroup(of: String.self) { group in
            for (store, directory) in zip(stores, directories) {
                group.addTask { try await load(directory, store).publicKeyBase64URL }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(Set(keys).count == 1, "\(keys)")
        for directory in directories {
            #expect(!FileManager.default.fileExists(atPath: directory.path + "/vapid-key.pem"), "no key file of its own")
        }
        for store in stores { await store.close() }

        let restarted = try await openPostgres(location)
        #expect(try await load(directories[0], restarted).publicKeyBase64URL == keys[0])
        await restarted.close()
    }

    @Test func aStoredValueThatIsNoKeyStopsTheStartWithoutShowingIt() async throws {
        let store = try await openPostgres(try PostgresServer.requireCurrent().createDatabase())
        defer { Task { await store.close() } }
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        _ = try await store.sharedSecret(RelayVAPIDKey.secretName, storingIfAbsent: "garbled-secret-value")
        let error = await #expect(throws: RelayStartupError.self) { _ = try await load(directory, store) }
        let message = "\(error.map { "\($0)" } ?? "")"
        #expect(message.contains("cannot use the VAPID key kept in \(Self.storeName)"), "\(message)")
        #expect(message.contains("relay_secrets") && message.contains("not a PEM P-256 private key"), "\(message)")
        #expect(!message.contains("garbled-secret-value"))
    }

    @Test func aStoreThatFailsStopsTheStartWithPostgreSQLsReason() async throws {
        let store = try await openPostgres(try PostgresServer.requireCurrent().createDatabase())
        await store.close()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let error = await #expect(throws: RelayStartupError.self) { _ = try await load(directory, store) }
        let message = "\(error.map { "\($0)" } ?? "")"
        #expect(message.contains("cannot use the VAPID key kept in") && message.contains("PostgreSQL") && message.contains("secret lookup"),
                "\(message)")
    }

    /// The operator's key is used, never copied into the database; a different stored key is named in a
    /// warning by its public half, and no private key reaches the log.
    @Test func anOperatorKeyWinsAndADifferentStoredKeyIsWarnedAbout() async throws {
        let location = try PostgresServer.requireCurrent().createDatabase()
        let store = try await openPostgres(location)
        defer { Task { await store.close() } }
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let operatorKey = VAPIDKey.generate()
        let path = directory.path + "/operator.pem"
        try operatorKey.pem.write(toFile: path, atomically: true, encoding: .utf8)

        let quiet = LogRecorder()
        #expect(try await load(path: path, directory, store, logger: quiet.logger).publicKeyBase64URL == operatorKey.publicKeyBase64URL)
        #expect(try await store.sharedSecret(RelayVAPIDKey.secretName, storingIfAbsent: nil) == nil, "not copied into the store")
        #expect(quiet.lines(at: .warning).isEmpty, "nothing stored, nothing to differ from")

        let shared = try await load(directory, store)  // a relay without --vapid-key makes the shared key
        let recorder = LogRecorder()
        #expect(try await load(path: path, directory, store, logger: recorder.logger).publicKeyBase64URL == operatorKey.publicKeyBase64URL)
        let warnings = recorder.lines(at: .warning)
        #expect(warnings.count == 1 && warnings[0].contains("--vapid-key differs from the VAPID key kept in the store"), "\(warnings)")
        #expect(warnings[0].contains(shared.publicKeyBase64URL) && warnings[0].contains(operatorKey.publicKeyBase64URL))
        for line in recorder.lines(at: .trace) {
            #expect(!line.contains("PRIVATE KEY") && !line.contains(pemBody(shared)) && !line.contains(pemBody(operatorKey)))
        }

        let same = LogRecorder()
        _ = try await load(path: nil, directory, store, logger: same.logger)
        try shared.pem.write(toFile: path, atomically: true, encoding: .utf8)
        _ = try await load(path: path, directory, store, logger: same.logger)
        #expect(same.lines(at: .warning).isEmpty, "the stored key given as --vapid-key is no mismatch")
    }

    /// SQLite keeps no shared secrets: the relay makes and keeps `vapid-key.pem` in its data directory.
    @Test func onSQLiteTheKeyIsTheDataDirectorysFile() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteStore(path: directory.path + "/homeward.sqlite")
        let key = try await load(directory, store)
        #expect(try VAPIDKeyFile.load(path: nil, dataDirectory: directory.path).publicKeyBase64URL == key.publicKeyBase64URL)
        #expect(try await load(directory, store).publicKeyBase64URL == key.publicKeyBase64URL)
        try store.close()
    }

    /// The base64 body of a key's PEM, which would show up in a log that printed the private key.
    private func pemBody(_ key: VAPIDKey) -> String {
        key.pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }
}

/// A directory of its own under the temporary directory, created at once.
private struct TemporaryDirectory: Sendable {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-vapid-\(UUID().uuidString)").path

    init() { try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
