import Logging
import NIOCore
import NIOPosix

/// What happens to the client's connection, for whoever must react (a node that missed bus traffic
/// while disconnected refreshes its caches on `reconnected`).
public enum NATSClientEvent: Sendable, Equatable {
    case disconnected(reason: String)
    case reconnected(NATSServerAddress)
    /// No more events follow. nil: `close()`; else why the client gave up.
    case closed(NATSError?)
}

/// Performs the actions of `NATSConnectionStateMachine`: opens sockets, writes commands, runs timers
/// and hands messages to subscribers. Confined to `eventLoop` (every channel it opens uses that loop,
/// so the channel handler calls it directly); `NATSClient` reaches it through `NIOLoopBound`.
final class NATSClientCore {
    typealias ConnectionID = NATSConnectionStateMachine.ConnectionID

    /// Where a subscription's messages go, and the counts of what it took and (a stream's full buffer) dropped.
    struct Subscriber {
        enum Consumer {
            /// Buffered for a task iterating `NATSSubscription`.
            case stream(AsyncStream<NATSMessage>.Continuation)
            /// Called on this loop as each message is read (`NATSHandlerSubscription`).
            case handler(@Sendable (NATSMessage) -> Void)
        }
        let consumer: Consumer
        let drops: NATSCounter
        let received: NATSCounter

        /// No more messages come: a stream's iteration ends once it has taken the buffered ones.
        func finish() {
            if case .stream(let continuation) = consumer { continuation.finish() }
        }
    }

    private struct PendingRequest {
        let promise: EventLoopPromise<NATSMessage>
        let timeout: Scheduled<Void>
    }

    let eventLoop: any EventLoop
    private let servers: [NATSServerAddress]
    private let configuration: NATSClientConfiguration
    private let logger: Logger
    private let events: AsyncStream<NATSClientEvent>.Continuation
    /// Connections that came back after a loss (`NATSClient.reconnects`).
    private let reconnects: NATSCounter
    private var machine: NATSConnectionStateMachine
    /// The socket of the current connection, from its `channelActive` until it is given up.
    private var channel: (any Channel)?
    private var subscribers: [UInt64: Subscriber] = [:]
    private var nextSubscriptionID: UInt64 = 0
    /// One entry per PING in flight, in send order: a `flush` id, or nil for a keepalive.
    private var pingsInFlight = CircularBuffer<UInt64?>()
    private var flushes: [UInt64: EventLoopPromise<Void>] = [:]
    private var nextFlushID: UInt64 = 0
    private var connectPromise: EventLoopPromise<Void>?
    private var keepalive: RepeatedTask?
    private var handshakeTimer: Scheduled<Void>?
    private var retryTimer: Scheduled<Void>?
    /// Request-reply: one wildcard subscription `_INBOX.<random>.*`; each request waits on its own token.
    private let inboxPrefix: String
    private var inboxSubscription: UInt64?
    private var requests: [Substring: PendingRequest] = [:]
    /// How many times the socket was flushed (each flush is one `write(2)` of what was written before it), for tests.
    private(set) var socketFlushes = 0

    /// Must be created on `eventLoop`: it is wrapped in a `NIOLoopBound` right away.
    init(eventLoop: any EventLoop, servers: [NATSServerAddress], configuration: NATSClientConfiguration, logger: Logger,
         events: AsyncStream<NATSClientEvent>.Continuation, reconnects: NATSCounter) {
        self.eventLoop = eventLoop
        self.reconnects = reconnects
        self.servers = servers
        self.configuration = configuration
        self.logger = logger
        self.events = events
        machine = NATSConnectionStateMachine(serverCount: servers.count, configuration: configuration)
        inboxPrefix = "_INBOX.\(Self.randomToken())." // each request's token follows the last dot
    }

    private var bound: NIOLoopBound<NATSClientCore> { NIOLoopBound(self, eventLoop: eventLoop) }

    static func randomToken() -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        return String((0..<22).map { _ in alphabet.randomElement()! })
    }

    // MARK: Connection lifecycle

    /// Starts the first connection; the future completes when a server accepted CONNECT, or fails
    /// with `connectFailed` once every server was tried.
    func start() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        connectPromise = promise
        let bound = self.bound
        keepalive = eventLoop.scheduleRepeatedTask(initialDelay: configuration.pingInterval, delay: configuration.pingInterval) { _ in
            bound.value.keepaliveTick()
        }
        perform(machine.start())
        return promise.futureResult
    }

    private func perform(_ action: NATSConnectionStateMachine.FailureAction) {
        if case .none = action { return }
        // Every other action gives up the current socket (if any) first.
        handshakeTimer?.cancel()
        handshakeTimer = nil
        channel?.close(promise: nil)
        channel = nil
        switch action {
        case .none:
            break
        case .open(let server, let connection):
            open(server: server, connection: connection)
        case .retry(let delay, let connection):
            scheduleRetry(after: delay, connection: connection)
        case .lost(let reason, let delay, let connection):
            logger.warning("NATS connection lost; reconnecting", metadata: ["reason": "\(reason)"])
            failPings(with: .connectionLost(reason))
            events.yield(.disconnected(reason: reason))
            scheduleRetry(after: delay, connection: connection)
        case .giveUp(let error):
            // A failed first connect is thrown to the caller of `connect`; giving up later is news.
            logger.log(level: connectPromise == nil ? .error : .debug, "NATS client gave up", metadata: ["error": "\(error)"])
            shutDown(with: error)
        }
    }

    private func open(server: Int, connection: ConnectionID) {
        let address = servers[server]
        let bound = self.bound
        logger.debug("NATS connecting", metadata: ["server": "\(address)", "connection": "\(connection)"])
        handshakeTimer = eventLoop.scheduleTask(in: configuration.connectTimeout) {
            bound.value.perform(bound.value.machine.handshakeTimedOut(connection: connection))
        }
        ClientBootstrap(group: eventLoop)
            .connectTimeout(configuration.connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NATSChannelHandler(core: bound.value, connection: connection))
                }
            }
            .connect(host: address.host, port: address.port)
            .whenFailure { error in
                bound.value.connectionFailed(connection, reason: "\(address): \(error)")
            }
    }

    private func scheduleRetry(after delay: TimeAmount, connection: ConnectionID) {
        let bound = self.bound
        retryTimer = eventLoop.scheduleTask(in: delay) {
            bound.value.perform(bound.value.machine.retryTimerFired(connection: connection))
        }
    }

    // MARK: Events from the channel handler

    func channelActive(_ channel: any Channel, connection: ConnectionID) {
        guard machine.isCurrent(connection) else {
            channel.close(promise: nil) // an attempt already given up (its handshake timed out)
            return
        }
        self.channel = channel
    }

    func connectionFailed(_ connection: ConnectionID, reason: String) {
        perform(machine.connectionFailed(connection: connection, reason: reason))
    }

    func received(_ op: NATSServerOp, connection: ConnectionID) {
        switch op {
        case .message(let message):
            deliver(message, connection: connection)
        case .ping:
            if machine.isCurrent(connection) { write(.pong) }
        case .pong:
            pongReceived(connection: connection)
        case .ok:
            break
        case .info(let info):
            guard let server = machine.infoReceived(info, connection: connection) else { return }
            let address = servers[server]
            var options = NATSConnectOptions(name: configuration.name, user: address.user, pass: address.password)
            options.echo = configuration.echo
            write(.connect(options), flush: false)
            write(.ping)
        case .error(let message):
            logger.warning("NATS server error", metadata: ["error": "\(message)"])
            perform(machine.serverErrorReceived(message, connection: connection))
        }
    }

    private func pongReceived(connection: ConnectionID) {
        switch machine.pongReceived(connection: connection) {
        case .none:
            break
        case .pong:
            if let flush = pingsInFlight.popFirst() ?? nil { flushes.removeValue(forKey: flush)?.succeed() }
        case .connected(let server, let resubscribe, let buffered, let isReconnect):
            handshakeTimer?.cancel()
            handshakeTimer = nil
            guard let channel else { return }
            for subscription in resubscribe {
                write(.subscribe(subject: subscription.subject, queueGroup: subscription.queueGroup, subscriptionID: subscription.id), flush: false)
                if let remaining = subscription.maxMessages {
                    write(.unsubscribe(subscriptionID: subscription.id, maxMessages: remaining), flush: false)
                }
            }
            for frame in buffered { channel.write(frame, promise: nil) }
            flushSocket()
            logger.info("NATS connected", metadata: ["server": "\(servers[server])", "resubscribed": "\(resubscribe.count)",
                                                     "buffered": "\(buffered.count)"])
            if isReconnect {
                // Before any reply on the new connection is read: a flush that returns after this sees the count.
                reconnects.increment()
                events.yield(.reconnected(servers[server]))
            } else {
                connectPromise?.succeed()
                connectPromise = nil
            }
        }
    }

    private func deliver(_ message: NATSMessage, connection: ConnectionID) {
        guard case .deliver(let last) = machine.messageReceived(subscriptionID: message.subscriptionID, connection: connection) else { return }
        if message.subscriptionID == inboxSubscription {
            guard message.subject.hasPrefix(inboxPrefix) else { return }
            let token = message.subject.dropFirst(inboxPrefix.count)
            if let request = requests.removeValue(forKey: token) {
                request.timeout.cancel()
                request.promise.succeed(message)
            }
            return
        }
        guard let subscriber = subscribers[message.subscriptionID] else { return }
        switch subscriber.consumer {
        case .stream(let continuation):
            switch continuation.yield(message) {
            case .dropped: subscriber.drops.increment()
            case .enqueued: subscriber.received.increment()
            case .terminated: break
            @unknown default: break
            }
        case .handler(let handle):
            subscriber.received.increment()
            handle(message)
        }
        if last { subscribers.removeValue(forKey: message.subscriptionID)?.finish() }
    }

    // MARK: Timers

    private func keepaliveTick() {
        switch machine.keepaliveTick() {
        case .none:
            break
        case .ping:
            pingsInFlight.append(nil)
            write(.ping)
        case .stale(let connection):
            connectionFailed(connection, reason: "stale connection: \(configuration.maxPingsOutstanding) PINGs without PONG")
        }
    }

    // MARK: Operations from NATSClient

    private func write(_ command: NATSClientCommand, flush: Bool = true) {
        guard let channel else { return }
        channel.write(command.encoded(allocator: channel.allocator), promise: nil)
        if flush { flushSocket() }
    }

    private func flushSocket() {
        guard let channel else { return }
        socketFlushes += 1
        channel.flush()
    }

    /// Writes a PUB (or buffers it while reconnecting); `flush: false` leaves it for the caller's next flush.
    /// Returns whether it was written to the socket.
    @discardableResult
    func publish(subject: String, replyTo: String?, payload: ByteBuffer, flush: Bool = true) throws(NATSError) -> Bool {
        let frame = NATSClientCommand.publish(subject: subject, replyTo: replyTo, payload: payload).encoded(allocator: channel?.allocator ?? ByteBufferAllocator())
        switch machine.publish(frame, payloadSize: payload.readableBytes) {
        case .write:
            channel?.write(frame, promise: nil)
            if flush { flushSocket() }
            return true
        case .buffered: return false
        case .fail(let error): throw error
        }
    }

    /// Publishes `messages` in order with one flush for all of them: one `write(2)` where a flush per
    /// message would make one each. Returns how many could not be sent (see `publish`).
    func publish(_ messages: [NATSClient.DetachedPublish]) -> Int {
        if messages.count > 1, machine.isConnected, let channel {
            // All in one buffer: one pass through the pipeline and one iovec instead of one per message.
            let size = messages.reduce(0) { $0 + $1.subject.utf8.count + $1.payload.readableBytes + 32 }
            var frames = channel.allocator.buffer(capacity: size)
            var failed = 0
            for message in messages {
                guard machine.refusal(ofPayloadSize: message.payload.readableBytes) == nil else {
                    failed += 1
                    continue
                }
                NATSClientCommand.publish(subject: message.subject, replyTo: nil, payload: message.payload).write(into: &frames)
            }
            if frames.readableBytes > 0 {
                channel.write(frames, promise: nil)
                flushSocket()
            }
            return failed
        }
        var failed = 0
        var written = false
        for message in messages {
            do throws(NATSError) {
                if try publish(subject: message.subject, replyTo: nil, payload: message.payload, flush: false) { written = true }
            } catch {
                failed += 1
            }
        }
        if written { flushSocket() }
        return failed
    }

    func flush(timeout: TimeAmount) -> EventLoopFuture<Void> {
        if let error = machine.flushRequested() { return eventLoop.makeFailedFuture(error) }
        nextFlushID += 1
        let id = nextFlushID
        let promise = eventLoop.makePromise(of: Void.self)
        flushes[id] = promise
        pingsInFlight.append(id)
        write(.ping)
        let bound = self.bound
        let timer = eventLoop.scheduleTask(in: timeout) { bound.value.flushes.removeValue(forKey: id)?.fail(NATSError.timeout); return }
        promise.futureResult.whenComplete { _ in timer.cancel() }
        return promise.futureResult
    }

    private func failPings(with error: NATSError) {
        pingsInFlight.removeAll()
        let waiting = flushes
        flushes = [:]
        for promise in waiting.values { promise.fail(error) }
    }

    func subscribe(subject: String, queueGroup: String?, bufferLimit: Int, overflow: NATSSubscription.Overflow)
        throws(NATSError) -> (id: UInt64, stream: AsyncStream<NATSMessage>, drops: NATSCounter, received: NATSCounter) {
        let policy: AsyncStream<NATSMessage>.Continuation.BufferingPolicy =
            overflow == .dropOldest ? .bufferingNewest(bufferLimit) : .bufferingOldest(bufferLimit)
        let (stream, continuation) = AsyncStream.makeStream(of: NATSMessage.self, bufferingPolicy: policy)
        let subscriber = try subscribe(subject: subject, queueGroup: queueGroup, consumer: .stream(continuation))
        let id = subscriber.id
        let bound = self.bound
        let loop = eventLoop
        continuation.onTermination = { termination in
            // The consumer stopped iterating (task cancelled, stream dropped): the server need not send more.
            guard case .cancelled = termination else { return }
            loop.execute { bound.value.unsubscribe(id: id, afterMessages: nil) }
        }
        return (id, stream, subscriber.drops, subscriber.received)
    }

    /// Records a subscription and sends its SUB (or leaves it for the next handshake).
    func subscribe(subject: String, queueGroup: String?, consumer: Subscriber.Consumer) throws(NATSError) -> (id: UInt64, drops: NATSCounter, received: NATSCounter) {
        nextSubscriptionID += 1
        let id = nextSubscriptionID
        if try machine.subscribe(.init(id: id, subject: subject, queueGroup: queueGroup)) {
            write(.subscribe(subject: subject, queueGroup: queueGroup, subscriptionID: id))
        }
        let subscriber = Subscriber(consumer: consumer, drops: NATSCounter(), received: NATSCounter())
        subscribers[id] = subscriber
        return (id, subscriber.drops, subscriber.received)
    }

    func unsubscribe(id: UInt64, afterMessages max: Int?) {
        let action = machine.unsubscribe(id: id, afterMessages: max)
        if action.send { write(.unsubscribe(subscriptionID: id, maxMessages: action.finish ? nil : max)) }
        if action.finish { subscribers.removeValue(forKey: id)?.finish() }
    }

    /// `number` is unique per client (`NATSClient` counts), so that a cancellation can name the request.
    func request(number: UInt64, subject: String, payload: ByteBuffer, timeout: TimeAmount) -> EventLoopFuture<NATSMessage> {
        do throws(NATSError) {
            if inboxSubscription == nil {
                nextSubscriptionID += 1
                let id = nextSubscriptionID
                if try machine.subscribe(.init(id: id, subject: inboxPrefix + "*", queueGroup: nil)) {
                    write(.subscribe(subject: inboxPrefix + "*", queueGroup: nil, subscriptionID: id))
                }
                inboxSubscription = id
            }
            let token = Substring(String(number))
            try publish(subject: subject, replyTo: inboxPrefix + token, payload: payload)
            let promise = eventLoop.makePromise(of: NATSMessage.self)
            let bound = self.bound
            let timer = eventLoop.scheduleTask(in: timeout) { bound.value.timeOut(request: token) }
            requests[token] = PendingRequest(promise: promise, timeout: timer)
            return promise.futureResult
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
    }

    private func timeOut(request token: Substring) {
        requests.removeValue(forKey: token)?.promise.fail(NATSError.timeout)
    }

    /// The task awaiting request `number` was cancelled: stop waiting for its reply.
    func cancelRequest(number: UInt64) {
        guard let request = requests.removeValue(forKey: Substring(String(number))) else { return }
        request.timeout.cancel()
        request.promise.fail(CancellationError())
    }

    /// `close()`, or giving up: everything waiting fails with `error`, every subscription ends.
    func shutDown(with error: NATSError) {
        _ = machine.close()
        keepalive?.cancel()
        retryTimer?.cancel()
        handshakeTimer?.cancel()
        keepalive = nil
        retryTimer = nil
        handshakeTimer = nil
        channel?.close(promise: nil)
        channel = nil
        connectPromise?.fail(error)
        connectPromise = nil
        failPings(with: error)
        let pending = requests
        requests = [:]
        for request in pending.values {
            request.timeout.cancel()
            request.promise.fail(error)
        }
        _ = machine.removeAllSubscriptions()
        let ending = subscribers
        subscribers = [:]
        for subscriber in ending.values { subscriber.finish() }
        events.yield(.closed(error == .closed ? nil : error))
        events.finish()
    }

    var isConnected: Bool { machine.isConnected }

    /// The subscriptions the server is (or, after a reconnect, will be) told about.
    var subscriptionIDs: [UInt64] { machine.subscriptions.keys.sorted() }
}
