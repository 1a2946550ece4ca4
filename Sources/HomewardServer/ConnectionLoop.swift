import CoreMetrics
import HomewardProtocol
import NIOCore
import NIOPosix

/// The work one event loop does for all of its connections at once: delivering and flushing what one
/// read burst produced, and one keepalive sweep per ping interval.
///
/// A walker's positions fan out to observers on every loop. Per delivery, that would cost a flush task
/// on the observer's loop and, for an observer on another loop, a cross-thread task (a closure, a
/// locked queue operation and often a wake-up of that loop). Instead, a loop collects what a read
/// burst produced and then does one pass: one task per other loop carrying all of that burst's
/// messages for it, and one flush per written connection, coalescing everything the connection got
/// from the burst into one `write(2)`.
///
/// `@unchecked Sendable`: handles on every loop hold their `ConnectionLoop`, but its state is confined
/// to `eventLoop` (every method but `start` and `eventLoop` preconditions that it runs there), as a
/// channel handler's is. A `NIOLoopBoundBox` per field would check the same thing once per access.
final class ConnectionLoop: @unchecked Sendable {
    /// The `ConnectionLoop` of the event loop running on the calling thread, if any.
    static let current = ThreadSpecificVariable<ConnectionLoop>()

    let eventLoop: any EventLoop
    private var connections: [ObjectIdentifier: WebSocketConnection] = [:]
    private var unflushed: [WebSocketConnection] = []
    /// The list being flushed; kept to reuse its storage.
    private var flushing: [WebSocketConnection] = []
    /// Messages for connections on other loops, by loop, waiting for the end of the read burst.
    private var outbox: [Batch] = []
    private var passScheduled = false
    /// Completed when the last connection leaves, once `closeAll` asked for it.
    private var emptied: EventLoopPromise<Void>?
    private var positionsSinceSample = 0
    private var fanoutLatencies: [Int64] = []
    /// At most this many fan-out times wait for the next report (32 × this positions a second per loop).
    static let maxPendingLatencies = 4096
    /// One position in this many has its fan-out timed for `homeward_fanout_latency_seconds`.
    static let fanoutSampleInterval = 32

    struct Batch: Sendable {
        let loop: ConnectionLoop
        var deliveries: [(ConnectionHandle, EncodedMessage)]
    }

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Makes this the loop's `current` and starts the keepalive sweep: every connection on this
    /// loop is pinged each `pingInterval`.
    func start(pingInterval: TimeAmount, fanoutLatency: Timer) {
        eventLoop.execute { Self.current.currentValue = self }
        eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
            self.reportFanoutLatencies(to: fanoutLatency)
        }
        eventLoop.scheduleRepeatedTask(initialDelay: pingInterval, delay: pingInterval) { _ in
            self.eventLoop.preconditionInEventLoop()
            for connection in self.connections.values { connection.keepaliveTick() }
        }
    }

    func add(_ connection: WebSocketConnection) {
        eventLoop.preconditionInEventLoop()
        connections[ObjectIdentifier(connection)] = connection
    }

    func remove(_ connection: WebSocketConnection) {
        eventLoop.preconditionInEventLoop()
        connections.removeValue(forKey: ObjectIdentifier(connection))
        if connections.isEmpty, let emptied {
            self.emptied = nil
            emptied.succeed()
        }
    }

    var connectionCount: Int {
        eventLoop.preconditionInEventLoop()
        return connections.count
    }

    /// Sends every connection on this loop a close frame with `code` and closes it once the frame is written; those
    /// still open after `grace` (a client that does not read, or whose socket is full) are closed whether their frame
    /// left or not. The future completes when the last of them has left (as NIO's `ServerQuiescingHelper` does for a
    /// server: no polling).
    ///
    /// One timer for the loop rather than one per connection (`closeNow`): each connection's would be cancelled
    /// as it closes, and cancelling searches the loop's scheduled tasks, thousands of them at shutdown.
    func closeAll(_ code: CloseCode, reason: String, grace: TimeAmount) -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        for connection in connections.values { connection.closeWithoutTimer(code, reason: reason) }
        guard !connections.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        let promise = emptied ?? eventLoop.makePromise()
        emptied = promise
        let dropLate = eventLoop.scheduleTask(in: grace) {
            for connection in self.connections.values { connection.drop() }
        }
        promise.futureResult.whenComplete { _ in dropLate.cancel() }
        return promise.futureResult
    }

    /// Whether to time this position's fan-out: one in `fanoutSampleInterval`, counted per loop
    /// without a lock.
    func sampleFanoutLatency() -> Bool {
        eventLoop.preconditionInEventLoop()
        positionsSinceSample += 1
        guard positionsSinceSample >= Self.fanoutSampleInterval else { return false }
        positionsSinceSample = 0
        return true
    }

    /// Keeps a fan-out time for the next `reportFanoutLatencies`: the histogram takes a lock per value,
    /// which must not be on a position's path (the presence shard is its one lock).
    func recordFanoutLatency(nanoseconds: Int64) {
        eventLoop.preconditionInEventLoop()
        if fanoutLatencies.count < Self.maxPendingLatencies { fanoutLatencies.append(nanoseconds) }
    }

    /// Moves the kept fan-out times into `timer`; once a second, from `start`.
    private func reportFanoutLatencies(to timer: Timer) {
        eventLoop.preconditionInEventLoop()
        for nanoseconds in fanoutLatencies { timer.recordNanoseconds(nanoseconds) }
        fanoutLatencies.removeAll(keepingCapacity: true)
    }

    /// Flushes `connection` in the next pass.
    func flushLater(_ connection: WebSocketConnection) {
        eventLoop.preconditionInEventLoop()
        schedulePass()
        unflushed.append(connection)
    }

    /// Hands `message` to `connection`, which lives on another loop, in the next pass.
    func forward(_ message: EncodedMessage, to connection: ConnectionHandle) {
        eventLoop.preconditionInEventLoop()
        schedulePass()
        let target = connection.loop
        if let index = outbox.firstIndex(where: { $0.loop === target }) {
            outbox[index].deliveries.append((connection, message))
        } else {
            outbox.append(Batch(loop: target, deliveries: [(connection, message)]))
        }
    }

    /// Sends the collected batches to their loops and flushes every connection written to since the
    /// last pass. Called when a connection's read burst is done: waiting for the end of the whole turn
    /// would hold the first position of a busy turn until every other socket's reads had been served.
    /// Writes that no read burst on this loop caused get a pass at the end of the turn.
    func flushAll() {
        eventLoop.preconditionInEventLoop()
        if !outbox.isEmpty {
            for batch in outbox {
                batch.loop.eventLoop.execute { batch.loop.receive(batch.deliveries) }
            }
            outbox.removeAll(keepingCapacity: true)
        }
        guard !unflushed.isEmpty else { return }
        swap(&unflushed, &flushing)
        for connection in flushing { connection.flushNow() }
        flushing.removeAll(keepingCapacity: true)
    }

    /// A batch from another loop: the same order as it was sent in, flushed at once.
    private func receive(_ deliveries: [(ConnectionHandle, EncodedMessage)]) {
        for (connection, message) in deliveries { connection.deliver(message) }
        flushAll()
    }

    /// Makes sure a pass runs by the end of this turn of the loop even if no read burst ends first.
    private func schedulePass() {
        guard !passScheduled else { return }
        passScheduled = true
        eventLoop.execute {
            self.passScheduled = false
            self.flushAll()
        }
    }
}
