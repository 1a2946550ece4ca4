import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A client of nats-server (core NATS over plain TCP): publish, subscribe, request-reply, and a
/// connection that comes back by itself. All state lives on one event loop (`NATSClientCore`);
/// every call here hops onto it. Errors thrown are `NATSError`. Call `close()` when done: until then
/// the client keeps its socket, timers and reconnect attempts alive.
///
/// ```swift
/// let client = try await NATSClient.connect(urls: ["nats://127.0.0.1:4222"])
/// let positions = try await client.subscribe(subject: "walker.ann")
/// try await client.publish(subject: "walker.ann", payload: ByteBuffer(string: "{...}"))
/// for await message in positions { ... }
/// await client.close()
/// ```
public final class NATSClient: Sendable {
    public let eventLoop: any EventLoop
    /// Disconnects, reconnects and the final close, in order.
    public let events: AsyncStream<NATSClientEvent>
    private let core: NIOLoopBound<NATSClientCore>
    private let configuration: NATSClientConfiguration
    private let requestNumbers = Atomic<UInt64>(0)
    private let droppedPublishCount = NATSCounter()
    private let reconnectCount: NATSCounter
    /// What `publishDetached` handed over that the client's loop has not written yet, whether a task that
    /// writes it is on its way there, and when the last write of them was (`detachedWriteInterval`).
    private let detached = Mutex<DetachedQueue>(DetachedQueue())

    struct DetachedQueue {
        var waiting: [DetachedPublish] = []
        /// A task will take `waiting`. (A write that others' calls made first may leave one that finds nothing.)
        var writeScheduled = false
        var lastWrite = NIODeadline.uptimeNanoseconds(0)
    }

    /// One message of `publishDetached`.
    struct DetachedPublish: Sendable {
        var subject: String
        var payload: ByteBuffer
    }

    private init(eventLoop: any EventLoop, core: NIOLoopBound<NATSClientCore>, events: AsyncStream<NATSClientEvent>,
                 configuration: NATSClientConfiguration, reconnects: NATSCounter) {
        self.eventLoop = eventLoop
        self.core = core
        self.events = events
        self.configuration = configuration
        self.reconnectCount = reconnects
    }

    /// The group a client runs on when its caller gives none: NIO's shared one.
    public static var defaultEventLoopGroup: any EventLoopGroup { MultiThreadedEventLoopGroup.singleton }

    /// Connects to the first of `urls` that completes the handshake (each is tried once, in order);
    /// after a later loss the client reconnects by itself, to the next URL in turn.
    public static func connect(urls: [String], configuration: NATSClientConfiguration = .init(),
                               eventLoopGroup: any EventLoopGroup = NATSClient.defaultEventLoopGroup,
                               logger: Logger = Logger(label: "homeward.nats")) async throws -> NATSClient {
        let servers = try urls.map { url throws(NATSError) in try NATSServerAddress(url: url) }
        guard !servers.isEmpty else { throw NATSError.noServers }
        let loop = eventLoopGroup.next()
        let (events, sink) = AsyncStream.makeStream(of: NATSClientEvent.self, bufferingPolicy: .bufferingNewest(64))
        let reconnects = NATSCounter()
        let core = try await loop.submit {
            NIOLoopBound(NATSClientCore(eventLoop: loop, servers: servers, configuration: configuration, logger: logger, events: sink,
                                        reconnects: reconnects),
                         eventLoop: loop)
        }.get()
        let client = NATSClient(eventLoop: loop, core: core, events: events, configuration: configuration, reconnects: reconnects)
        try await loop.flatSubmit { core.value.start() }.get()
        return client
    }

    /// Sends `payload` to `subject` (no wildcards). While reconnecting the message is buffered and sent
    /// after the handshake, up to `reconnectBufferLimit` bytes; beyond it this throws `reconnectBufferFull`.
    public func publish(subject: String, payload: ByteBuffer, replyTo: String? = nil) async throws {
        try NATSSubject.validate(subject, wildcards: false)
        if let replyTo { try NATSSubject.validate(replyTo, wildcards: false) }
        let core = self.core
        _ = try await eventLoop.submit {
            self.writeDetached()
            return try core.value.publish(subject: subject, replyTo: replyTo, payload: payload)
        }.get()
    }

    /// Publishes without waiting, for callers on an event loop that must not suspend (a relay's position
    /// path): the message is handed to the client's loop, and messages from one thread keep their order.
    /// What cannot be sent (a bad subject, a full reconnect buffer, a payload over `max_payload`) is
    /// dropped and counted in `droppedPublishes`.
    ///
    /// Messages handed over while the loop has not yet written the earlier ones go out with them: one task
    /// on the loop and one `write(2)` for all (everything published during one turn of the client's loop
    /// from that loop, and whatever other threads publish meanwhile). With a `detachedWriteInterval`, also
    /// everything handed over until that long after the previous such write; a message that comes later than
    /// that waits for nothing.
    public func publishDetached(subject: String, payload: ByteBuffer) {
        do throws(NATSError) { try NATSSubject.validate(subject, wildcards: false) } catch {
            droppedPublishCount.increment()
            return
        }
        let interval = configuration.detachedWriteInterval
        let delay: TimeAmount? = detached.withLock { detached in
            detached.waiting.append(DetachedPublish(subject: subject, payload: payload))
            guard !detached.writeScheduled else { return nil }
            detached.writeScheduled = true
            guard interval > .zero else { return .zero }
            return max(.zero, detached.lastWrite + interval - .now())
        }
        // nil: the task scheduled before takes this message too, as it has not taken the waiting ones yet.
        guard let delay else { return }
        if delay > .zero {
            eventLoop.scheduleTask(in: delay) { self.writeDetached() }
        } else {
            eventLoop.execute { self.writeDetached() }
        }
    }

    /// On the loop: publishes everything `publishDetached` handed over so far, in order, with one flush.
    /// Every other call that writes does this first, so nothing it sends overtakes a message handed over before.
    private func writeDetached() {
        let messages = detached.withLock { detached in
            detached.writeScheduled = false
            var taken: [DetachedPublish] = []
            swap(&taken, &detached.waiting)
            if !taken.isEmpty { detached.lastWrite = .now() }
            return taken
        }
        guard !messages.isEmpty else { return }
        let failed = core.value.publish(messages)
        if failed > 0 { droppedPublishCount.add(failed) }
    }

    /// Messages `publishDetached` could not send.
    public var droppedPublishes: Int { droppedPublishCount.value }

    /// How many times the connection came back after a loss (messages sent meanwhile were missed). Counted
    /// before anything the new connection brings is read, so a `flush` that returns after a reconnect
    /// finds it counted.
    public var reconnects: Int { reconnectCount.value }

    /// Subscribes to `subject` (`*` and `>` allowed); with a queue group, each message goes to one
    /// member of the group. The SUB is on its way when this returns; `flush()` waits until the server has it.
    public func subscribe(subject: String, queueGroup: String? = nil, bufferLimit: Int? = nil,
                          overflow: NATSSubscription.Overflow = .dropOldest) async throws -> NATSSubscription {
        try NATSSubject.validate(subject, wildcards: true)
        if let queueGroup { try NATSSubject.validateQueueGroup(queueGroup) }
        let limit = max(1, bufferLimit ?? configuration.subscriptionBufferLimit)
        let core = self.core
        let made = try await eventLoop.submit {
            self.writeDetached()
            return try core.value.subscribe(subject: subject, queueGroup: queueGroup, bufferLimit: limit, overflow: overflow)
        }.get()
        return NATSSubscription(subject: subject, queueGroup: queueGroup, id: made.id, stream: made.stream, drops: made.drops,
                                received: made.received, client: self)
    }

    /// Subscribes to `subject` like `subscribe(subject:queueGroup:bufferLimit:overflow:)`, but calls
    /// `handler` with each message on the client's event loop as it is read: no buffer, no task between the
    /// socket and the consumer. For consumers that only hand messages on without blocking (a relay's
    /// positions, which go straight to its connections' event loops); the whole connection waits while
    /// `handler` runs, and a consumer that falls behind slows the socket instead of dropping messages here.
    /// The SUB is on its way when this returns; `flush()` waits until the server has it.
    public func subscribe(subject: String, queueGroup: String? = nil,
                          handler: @escaping @Sendable (NATSMessage) -> Void) async throws -> NATSHandlerSubscription {
        try NATSSubject.validate(subject, wildcards: true)
        if let queueGroup { try NATSSubject.validateQueueGroup(queueGroup) }
        let core = self.core
        let made = try await eventLoop.submit {
            self.writeDetached()
            return try core.value.subscribe(subject: subject, queueGroup: queueGroup, consumer: .handler(handler))
        }.get()
        return NATSHandlerSubscription(subject: subject, queueGroup: queueGroup, id: made.id, received: made.received, client: self)
    }

    func unsubscribe(id: UInt64, afterMessages max: Int?) async {
        let core = self.core
        try? await eventLoop.submit {
            self.writeDetached()
            core.value.unsubscribe(id: id, afterMessages: max)
        }.get()
    }

    /// Publishes with a reply subject in this client's inbox and returns the first reply, or throws
    /// `timeout`. All requests share one inbox subscription. Cancelling the awaiting task ends the wait
    /// with `CancellationError`.
    public func request(subject: String, payload: ByteBuffer, timeout: Duration = .seconds(5)) async throws -> NATSMessage {
        try NATSSubject.validate(subject, wildcards: false)
        let core = self.core
        let loop = eventLoop
        let amount = TimeAmount(timeout)
        let number = requestNumbers.add(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            let reply = loop.flatSubmit {
                self.writeDetached()
                return core.value.request(number: number, subject: subject, payload: payload, timeout: amount)
            }
            // A cancel that came before the request was registered found nothing to cancel: repeat it after.
            if Task.isCancelled { loop.execute { core.value.cancelRequest(number: number) } }
            return try await reply.get()
        } onCancel: {
            loop.execute { core.value.cancelRequest(number: number) }
        }
    }

    /// Waits until the server has processed everything this client sent before (one PING round trip).
    public func flush(timeout: Duration = .seconds(5)) async throws {
        let core = self.core
        let amount = TimeAmount(timeout)
        try await eventLoop.flatSubmit {
            self.writeDetached()
            return core.value.flush(timeout: amount)
        }.get()
    }

    /// Whether a connection is up right now (false while reconnecting and after `close()`).
    public var isConnected: Bool {
        get async {
            let core = self.core
            return (try? await eventLoop.submit { core.value.isConnected }.get()) ?? false
        }
    }

    /// How many times the client flushed its socket (one `write(2)` each), for tests.
    func socketFlushCount() async -> Int {
        let core = self.core
        return (try? await eventLoop.submit { core.value.socketFlushes }.get()) ?? 0
    }

    /// The live subscriptions' ids (the request inbox included), for tests.
    func subscriptionIDs() async -> [UInt64] {
        let core = self.core
        return (try? await eventLoop.submit { core.value.subscriptionIDs }.get()) ?? []
    }

    /// Waits (bounded by `closeFlushTimeout`) until the server has what was published, then closes.
    /// Subscriptions end, waiting requests fail with `closed`, buffered publishes are dropped.
    public func close() async {
        if await isConnected { try? await flush(timeout: Duration(configuration.closeFlushTimeout)) }
        let core = self.core
        try? await eventLoop.submit { core.value.shutDown(with: .closed) }.get()
    }
}
