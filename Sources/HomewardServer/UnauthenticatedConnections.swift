import Synchronization

/// Counts, per client IP address and across every event loop, the connections that have not signed in yet,
/// so that one address cannot hold the relay's file descriptors with idle or half-open connections.
///
/// A lock rather than per-loop shards: it is taken once when a connection is accepted and once when it
/// signs in or closes, never on the message path.
final class UnauthenticatedConnections: Sendable {
    let limitPerAddress: Int
    private let counts = Mutex<[String: Int]>([:])

    init(limitPerAddress: Int) {
        self.limitPerAddress = limitPerAddress
    }

    /// A slot for a new connection from `address`, or nil when that address already holds the limit.
    func admit(_ address: String) -> Slot? {
        let admitted = counts.withLock { counts in
            let current = counts[address, default: 0]
            guard current < limitPerAddress else { return false }
            counts[address] = current + 1
            return true
        }
        return admitted ? Slot(address: address, owner: self) : nil
    }

    /// How many unauthenticated connections `address` holds now.
    func count(for address: String) -> Int {
        counts.withLock { $0[address, default: 0] }
    }

    fileprivate func release(_ address: String) {
        counts.withLock { counts in
            let remaining = counts[address, default: 1] - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    /// One unauthenticated connection's place in the count; released once, when it signs in or closes.
    final class Slot: Sendable {
        let address: String
        private let owner: UnauthenticatedConnections
        private let released = Atomic<Bool>(false)

        fileprivate init(address: String, owner: UnauthenticatedConnections) {
            self.address = address
            self.owner = owner
        }

        func release() {
            guard !released.exchange(true, ordering: .relaxed) else { return }
            owner.release(address)
        }
    }
}

/// Why a freshly accepted connection was closed before anything was read from it.
enum ConnectionRefusal: Error {
    case tooManyUnauthenticated(address: String)
}
