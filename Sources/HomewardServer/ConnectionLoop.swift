import NIOCore

/// The work one event loop does for all of its connections at once: flushing every connection
/// written to by one read burst, and one keepalive sweep per ping interval.
///
/// A position fan-out writes to many connections at once. One flush pass per read burst instead of
/// one task per written connection saves a closure and a task-queue operation per delivery, and
/// still coalesces everything a connection got from that burst into one `write(2)`.
/// Confined to `eventLoop`: every method but `start` is called on it.
final class ConnectionLoop: @unchecked Sendable {
    let eventLoop: any EventLoop
    private var connections: [ObjectIdentifier: WebSocketConnection] = [:]
    private var unflushed: [WebSocketConnection] = []
    /// The list being flushed; kept to reuse its storage.
    private var flushing: [WebSocketConnection] = []

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Starts the keepalive sweep: every connection on this loop is pinged each `pingInterval`.
    func start(pingInterval: TimeAmount) {
        eventLoop.scheduleRepeatedTask(initialDelay: pingInterval, delay: pingInterval) { _ in
            for connection in self.connections.values { connection.keepaliveTick() }
        }
    }

    func add(_ connection: WebSocketConnection) {
        eventLoop.assertInEventLoop()
        connections[ObjectIdentifier(connection)] = connection
    }

    func remove(_ connection: WebSocketConnection) {
        eventLoop.assertInEventLoop()
        connections.removeValue(forKey: ObjectIdentifier(connection))
    }

    /// Flushes `connection` at the next `flushAll`: when the read that caused the write is done,
    /// or at the end of this turn of the loop for writes that no read on this loop caused.
    func flushLater(_ connection: WebSocketConnection) {
        eventLoop.assertInEventLoop()
        if unflushed.isEmpty {
            eventLoop.execute { self.flushAll() }
        }
        unflushed.append(connection)
    }

    /// Flushes every connection written to since the last call. Called when a connection's read
    /// burst is done: waiting for the end of the whole turn would hold the first position of a
    /// busy turn until every other socket's reads had been served.
    func flushAll() {
        guard !unflushed.isEmpty else { return }
        swap(&unflushed, &flushing)
        for connection in flushing { connection.flushNow() }
        flushing.removeAll(keepingCapacity: true)
    }
}
