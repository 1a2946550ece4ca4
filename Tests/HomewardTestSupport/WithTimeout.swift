import Foundation
import Synchronization

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

/// Like `withTimeout`, but at the deadline fails at once and leaves `body` running, for a body that cannot be
/// cancelled and may never end (a relay that hangs while it stops): the test fails instead of hanging with it.
package func withTimeoutLeavingHungBody<T: Sendable>(
    _ seconds: Double, _ what: @autoclosure () -> String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let description = what()
    return try await withCheckedThrowingContinuation { continuation in
        let first = FirstResult(continuation)
        let timer = Task {
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            first.resume(with: .failure(TestFailure("timed out after \(seconds) s waiting for \(description)")))
        }
        Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            timer.cancel()
            first.resume(with: result)
        }
    }
}

/// A continuation resumed by whichever comes first.
private final class FirstResult<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = Mutex(continuation) }

    func resume(with result: Result<T, any Error>) {
        continuation.withLock { $0.take() }?.resume(with: result)
    }
}
