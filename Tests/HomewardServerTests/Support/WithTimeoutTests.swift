import HomewardTestSupport
import Synchronization
import XCTest

/// The tests' guard against hangs must itself never hang: a body that ignores cancellation is what a hung
/// relay stop looks like.
final class WithTimeoutTests: XCTestCase {
    func testABodyThatIgnoresCancellationFailsAtTheDeadlineInsteadOfHanging() async throws {
        let parked = ParkedBody()
        let started = ContinuousClock.now
        do {
            _ = try await withTimeout(0.2, "a body that never ends") { await parked.wait() }
            XCTFail("a body that never ends returned")
        } catch let failure as TestFailure {
            XCTAssertTrue(failure.description.contains("a body that never ends"), failure.description)
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        parked.release()
    }

    func testTheBodysResultAndErrorComeThrough() async throws {
        let value = try await withTimeout(5, "a value") { 42 }
        XCTAssertEqual(value, 42)
        do {
            _ = try await withTimeout(5, "an error") { () async throws -> Int in throw TestFailure("the body's") }
            XCTFail("the body's error was lost")
        } catch let failure as TestFailure {
            XCTAssertEqual(failure.description, "the body's")
        }
    }
}

/// A body parked on a continuation that only `release` resumes: it does not see cancellation.
private final class ParkedBody: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Void, Never>?, released: Bool)>((nil, false))

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.released { return true }
                state.continuation = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    func release() {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.released = true
            defer { state.continuation = nil }
            return state.continuation
        }?.resume()
    }
}
