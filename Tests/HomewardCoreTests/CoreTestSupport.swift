import HomewardCore
import HomewardProtocol
import Synchronization
import XCTest

/// Deterministic identifiers for sessions and alarms: `s_1`, `a_2`, ...
final class CoreTestIDSequence: Sendable {
    private let counter = Mutex(0)

    func next(_ prefix: String) -> String {
        let n = counter.withLock { value -> Int in
            value += 1
            return value
        }
        return "\(prefix)\(n)"
    }
}

/// A hand-written presence view for the rules.
struct CoreTestPresence: PresenceView {
    var online: Set<String> = []
    var seen: [String: Int64] = [:]
    /// Positions hidden from nobody.
    var positions: [String: Position] = [:]
    /// Last positions with the restrictions they were sent under; take the place of `positions`.
    var recorded: [String: LastPosition] = [:]

    func isOnline(_ username: String) -> Bool { online.contains(username) }
    func lastSeen(_ username: String) -> Int64? { seen[username] }
    func lastPosition(_ username: String) -> Position? { last(username).latest }
    func lastPosition(of username: String, shownTo askers: [String]) -> Position? { last(username).shown(to: askers) }

    private func last(_ username: String) -> LastPosition { recorded[username] ?? LastPosition(positions[username]) }
}

enum CoreTestErrorKind: Equatable {
    case invalid, unauthenticated, forbidden, notFound, conflict, rateLimited, storage
}

extension RelayError {
    var kind: CoreTestErrorKind {
        switch self {
        case .invalid: return .invalid
        case .unauthenticated: return .unauthenticated
        case .forbidden: return .forbidden
        case .notFound: return .notFound
        case .conflict: return .conflict
        case .rateLimited: return .rateLimited
        case .storage: return .storage
        }
    }
}

/// Asserts that `expression` throws a `RelayError` of the given kind.
func assertRelayError<T>(
    _ expression: @autoclosure () throws -> T, _ expected: CoreTestErrorKind,
    file: StaticString = #filePath, line: UInt = #line
) {
    do {
        _ = try expression()
        XCTFail("expected RelayError.\(expected), nothing was thrown", file: file, line: line)
    } catch let error as RelayError {
        XCTAssertEqual(error.kind, expected, "wrong error: \(error)", file: file, line: line)
    } catch {
        XCTFail("expected RelayError.\(expected), got \(error)", file: file, line: line)
    }
}

extension Outcome {
    /// The events of one type, in order.
    func sent(_ type: String) -> [(to: String, message: JSONValue)] {
        events.filter { $0.message["type"] == .string(type) }
    }

    /// Who got events of `type`, in order.
    func recipients(of type: String) -> [String] { sent(type).map(\.to) }

    /// All event types, in order.
    var eventTypes: [String] { events.compactMap { $0.message["type"]?.stringValue } }

    func reply(_ key: String) -> JSONValue? { reply.last(where: { $0.0 == key })?.1 }

    var replyKeys: [String] { reply.map(\.0) }
}

extension JSONValue {
    /// The elements of an array, nil for anything else.
    var coreTestElements: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
}

/// Builders for a `RelayState` with users and friendships already in place.
enum CoreFixture {
    static let now: Int64 = 1_763_830_000_000

    /// A state whose users are named after `usernames`, display name capitalised.
    static func state(_ usernames: [String] = ["alice", "bob", "carol", "dave"],
                      friends pairs: [(String, String)] = []) -> RelayState {
        let ids = CoreTestIDSequence()
        var state = RelayState(makeID: { ids.next($0) })
        for username in usernames {
            do {
                _ = try state.register(username: username, name: username.capitalized, passwordHash: "hash", now: now)
            } catch {
                XCTFail("register \(username) failed: \(error)")
            }
        }
        for (a, b) in pairs { befriend(&state, a, b) }
        return state
    }

    static func befriend(_ state: inout RelayState, _ a: String, _ b: String, file: StaticString = #filePath, line: UInt = #line) {
        do {
            _ = try state.requestFriend(a, b, now: now)
            _ = try state.acceptFriend(b, a, now: now)
        } catch {
            XCTFail("befriending \(a) and \(b) failed: \(error)", file: file, line: line)
        }
        XCTAssertTrue(state.areFriends(a, b), file: file, line: line)
    }

    static func user(_ username: String) -> JSONValue {
        ["username": .string(username), "name": .string(username.capitalized)]
    }
}
