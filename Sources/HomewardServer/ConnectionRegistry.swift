import HomewardProtocol
import NIOCore
import Synchronization

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

    /// Closes every connection with `code` (`ConnectionLoop.closeAll`: those still open after `grace` are closed
    /// without the close frame) and waits until they are gone, at most a second longer than `grace`.
    ///
    /// A dropped connection may still wait for its peer's TLS close_notify (at most the TLS handler's own 5 s): the
    /// shutdown goes on meanwhile, and the event loops' shutdown, the last step, waits for what is left. Each loop
    /// shuts down once its own connections are gone, so by then another may have stopped: nothing here hops from
    /// one loop to another (a task sent to a stopped loop is dropped), each loop's result is counted where it completes.
    func closeAll(_ code: CloseCode, reason: String, grace: TimeAmount) async {
        let closing = loops.values.map { loop in loop.eventLoop.flatSubmit { loop.closeAll(code, reason: reason, grace: grace) } }
        let wait = ClosingWait(loops: closing.count)
        for future in closing { future.whenComplete { _ in wait.loopClosed() } }
        // Off the event loops, so that it needs none of them.
        let deadline = Task {
            try? await Task.sleep(for: .nanoseconds((grace + .seconds(1)).nanoseconds))
            wait.end()
        }
        await wait.ended()
        deadline.cancel()
    }
}

/// `ConnectionRegistry.closeAll`'s wait: over once every loop's connections are gone, or at the deadline.
private final class ClosingWait: Sendable {
    private let state: Mutex<(loopsLeft: Int, over: Bool, waiter: CheckedContinuation<Void, Never>?)>

    init(loops: Int) { state = Mutex((loops, loops == 0, nil)) }

    /// On the loop whose connections are gone.
    func loopClosed() {
        let last = state.withLock { state in
            state.loopsLeft -= 1
            return state.loopsLeft == 0
        }
        if last { end() }
    }

    func end() {
        let waiter = state.withLock { state in
            state.over = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func ended() async {
        await withCheckedContinuation { continuation in
            let over = state.withLock { state in
                if !state.over { state.waiter = continuation }
                return state.over
            }
            if over { continuation.resume() }
        }
    }
}
