import Foundation
import HomewardCore
import HomewardProtocol
import HomewardTestSupport
import Synchronization

/// Remembers each notice's revoked token (the tests' way to name a notice); with a `delay` (microseconds) it takes that
/// long per notice, as a busy relay might. Hands over the heartbeats it hears one at a time (`nextHeartbeat`).
final class TokenReceiver: BusReceiver {
    private let received = Mutex<[String]>([])
    private let delay: UInt32
    private let heartbeats: AsyncStream<PresenceHeartbeat>
    private let heartbeatInput: AsyncStream<PresenceHeartbeat>.Continuation
    var tokens: [String] { received.withLock { $0 } }
    /// The relays whose notices the bus said were missed (`missedNotices(of:)`), in order.
    private let missed = Mutex<[String]>([])
    var missedFrom: [String] { missed.withLock { $0 } }

    init(delay: UInt32 = 0) {
        self.delay = delay
        (heartbeats, heartbeatInput) = AsyncStream.makeStream()
    }

    func nextHeartbeat() async throws -> PresenceHeartbeat {
        let heartbeats = self.heartbeats
        return try await withTimeout(10, "a heartbeat") {
            for await heartbeat in heartbeats { return heartbeat }
            throw TestFailure("no more heartbeats")
        }
    }

    func remoteChanges(_ notice: ChangeNotice) {
        if delay > 0 { usleep(delay) }
        received.withLock { $0 += notice.revokedTokens }
    }

    func remotePresence(_ message: PresenceMessage) {
        if case .heartbeat(let heartbeat) = message { heartbeatInput.yield(heartbeat) }
    }
    func localPresenceSnapshot() async -> PresenceSnapshot { PresenceSnapshot(node: "here", epoch: "e", seq: 0) }
    func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {}
    func localLastPosition(of walker: String, for askers: [String]) -> LastPositionAnswer? { nil }
    func busDisconnected() {}
    func missedNotices(of node: String) { missed.withLock { $0.append(node) } }
    func busReconnected() {}
}
