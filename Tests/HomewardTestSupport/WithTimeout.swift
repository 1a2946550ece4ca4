import Foundation

/// Why a test helper gave up; thrown errors fail the XCTest with this description.
package struct TestFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Races `body` against a deadline. `Task.sleep` here is only the guard that turns a hang into a failure.
package func withTimeout<T: Sendable>(
    _ seconds: Double, _ what: @autoclosure () -> String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let description = what()
    return try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            throw TestFailure("timed out after \(seconds) s waiting for \(description)")
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TestFailure("no result for \(description)") }
        return first
    }
}
