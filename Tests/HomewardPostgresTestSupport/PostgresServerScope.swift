import Testing

extension PostgresServer {
    /// The server of the running suite (see `PostgresServerScope`).
    @TaskLocal package static var current: Availability = .unavailable("no PostgreSQL server: the suite needs the .postgresServer trait")

    /// The suite's server; cancels the test when PostgreSQL tests are skipped, fails it when PostgreSQL is missing.
    package static func requireCurrent() throws -> PostgresServer {
        guard let server = try current.server() else { try Test.cancel("\(skipVariable)=1: PostgreSQL tests skipped") }
        return server
    }
}

/// Starts one PostgreSQL server for a whole suite and stops it afterwards; its tests find it in
/// `PostgresServer.current`.
package struct PostgresServerScope: SuiteTrait, TestScoping {
    package var isRecursive: Bool { false }

    package func provideScope(for test: Test, testCase: Test.Case?,
                              performing function: @Sendable () async throws -> Void) async throws {
        let availability = await PostgresServer.startIfAvailable()
        defer { if case .running(let server) = availability { server.remove() } }
        try await PostgresServer.$current.withValue(availability) { try await function() }
    }
}

extension Trait where Self == PostgresServerScope {
    package static var postgresServer: Self { PostgresServerScope() }
}
