import HomewardProtocol
import NIOCore

/// Every open WebSocket connection, each held by the `ConnectionLoop` of the event loop that
/// serves it, so that shutdown can say goodbye to each.
struct ConnectionRegistry: Sendable {
    /// One per event loop of the relay's group, by the loop's identity.
    private let loops: [ObjectIdentifier: ConnectionLoop]

    init(loops: [ConnectionLoop]) {
        self.loops = Dictionary(uniqueKeysWithValues: loops.map { (ObjectIdentifier($0.eventLoop), $0) })
    }

    /// The `ConnectionLoop` of `eventLoop`, which must belong to the relay's group.
    func loop(for eventLoop: any EventLoop) -> ConnectionLoop {
        guard let loop = loops[ObjectIdentifier(eventLoop)] else {
            preconditionFailure("a connection on an event loop outside the relay's group")
        }
        return loop
    }

    /// Closes every connection with `code` and waits until they are gone (or `timeout` passes).
    func closeAll(_ code: CloseCode, reason: String, timeout: TimeAmount) async {
        for loop in loops.values {
            loop.eventLoop.execute { loop.closeAll(code, reason: reason) }
        }
        let deadline = NIODeadline.now() + timeout
        while await count() > 0, NIODeadline.now() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    private func count() async -> Int {
        var total = 0
        for loop in loops.values {
            total += (try? await loop.eventLoop.submit { loop.connectionCount }.get()) ?? 0
        }
        return total
    }
}
