import Foundation
import HomewardCore
import HomewardProtocol
import Synchronization

/// Remembers each notice's revoked token (the tests' way to name a notice); with a `delay` (microseconds) it takes that
/// long per notice, as a busy relay might.
final class TokenReceiver: BusReceiver {
    private let received = Mutex<[String]>([])
    private let delay: UInt32
    var tokens: [String] { received.withLock { $0 } }

    init(delay: UInt32 = 0) {
        self.delay = delay
    }

    func remoteChanges(_ notice: ChangeNotice) {
        if delay > 0 { usleep(delay) }
        received.withLock { $0 += notice.revokedTokens }
    }

    func remotePresence(_ message: PresenceMessage) {}
    func localPresenceSnapshot() async -> PresenceSnapshot { PresenceSnapshot(node: "here", epoch: "e", seq: 0) }
    func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {}
    func localLastPosition(of walker: String, for askers: [String]) -> LastPositionAnswer? { nil }
    func busDisconnected() {}
    func busReconnected() {}
}
