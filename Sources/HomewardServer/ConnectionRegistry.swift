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

    /// Closes every connection with `code` (`ConnectionLoop.closeAll`: those still open after `grace` are closed
    /// without the close frame) and waits until they are gone, at most a second longer than `grace`.
    func closeAll(_ code: CloseCode, reason: String, grace: TimeAmount) async {
        guard let any = loops.values.first?.eventLoop else { return }
        let done = any.makePromise(of: Void.self)
        let closed = loops.values.map { loop in loop.eventLoop.flatSubmit { loop.closeAll(code, reason: reason, grace: grace) } }
        EventLoopFuture.andAllComplete(closed, on: any).whenComplete { _ in done.succeed() }
        // A dropped connection may still wait for its peer's TLS close_notify (at most the TLS handler's own 5 s): the
        // shutdown goes on meanwhile; the event loops' shutdown, the last step, waits for what is left.
        let deadline = any.scheduleTask(in: grace + .seconds(1)) { done.succeed() }
        try? await done.futureResult.get()
        deadline.cancel()
    }
}
