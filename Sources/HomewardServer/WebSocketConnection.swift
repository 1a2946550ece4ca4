import HomewardCore
import HomewardProtocol
import Logging
import NIOCore
import NIOWebSocket

/// One client's WebSocket: reads requests, answers them in order, and writes what the relay sends.
///
/// Requests of a connection are served one at a time, so replies come back in request order
/// and a request sent right after `login` already sees the signed-in user. Positions, the
/// hot path, are validated and fanned out right here on the event loop.
final class WebSocketConnection: ChannelInboundHandler, ClientSink, @unchecked Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let relay: Relay
    private let limits: ConnectionLimits
    private let metrics: RelayMetrics
    let loop: ConnectionLoop
    private let logger: Logger
    let eventLoop: any EventLoop
    private let peer: String
    /// This connection's place among its address's unauthenticated connections; released on sign-in.
    private let unauthenticatedSlot: UnauthenticatedConnections.Slot?

    // Confined to `eventLoop`.
    private var context: ChannelHandlerContext?
    private var auth: Authentication?
    // Requests only wait while another is being served, which most connections never see; the default
    // capacity (16) would be allocated for every idle connection. It doubles when it has to.
    private var waiting = CircularBuffer<IncomingRequest>(initialCapacity: 1)
    private var busy = false
    private var outbound = OutboundQueue()
    private var flushScheduled = false
    private var closing = false
    private var lastHeard = NIODeadline.now()
    private var bucket: TokenBucket
    /// Pings and pongs from the client, limited apart from requests: answering a ping costs a write,
    /// and a client that floods them gets closed rather than answered.
    private var controlBucket: TokenBucket
    /// The pong for the latest ping not answered yet. RFC 6455 5.5.3 lets an endpoint answer only the most
    /// recent ping, so a burst of pings costs one pong, written at the end of the read burst.
    private var pendingPong: ByteBuffer?
    /// Reading stops while the client does not take what is written to it (see `channelWritabilityChanged`).
    private var readingPaused = false
    private var closeTimer: Scheduled<Void>?
    private var authFailures = 0
    private var authTimer: Scheduled<Void>?
    /// The WebSocket frame encoder's context: messages are written here already framed (see `write`).
    private var frameEncoder: ChannelHandlerContext?

    init(relay: Relay, limits: ConnectionLimits, metrics: RelayMetrics, loop: ConnectionLoop,
         logger: Logger, peer: String, unauthenticatedSlot: UnauthenticatedConnections.Slot? = nil) {
        self.relay = relay
        self.limits = limits
        self.metrics = metrics
        self.loop = loop
        self.logger = logger
        self.eventLoop = loop.eventLoop
        self.peer = peer
        self.unauthenticatedSlot = unauthenticatedSlot
        self.bucket = TokenBucket(rate: limits.requestsPerSecond, burst: limits.requestsPerSecond * 2)
        self.controlBucket = TokenBucket(rate: limits.controlFramesPerSecond, burst: limits.controlFramesPerSecond * 2)
    }

    // MARK: Life cycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        frameEncoder = try? context.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)
        loop.add(self)
        metrics.connections.increment()
        startAuthTimer()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        teardown()
    }

    func channelInactive(context: ChannelHandlerContext) {
        teardown()
        context.fireChannelInactive()
    }

    private func teardown() {
        guard let context else { return }
        self.context = nil
        frameEncoder = nil
        closing = true
        authTimer?.cancel()
        closeTimer?.cancel()
        pendingPong = nil
        unauthenticatedSlot?.release()
        loop.remove(self)
        metrics.connections.decrement()
        if let auth { relay.disconnect(auth.username, sink: self) }
        auth = nil
        _ = context
    }

    private func startAuthTimer() {
        authTimer?.cancel()
        // Captured strongly: a weak reference would give this object a side table and make every
        // retain and release of it (several per delivered position) take the runtime's slow path.
        // The timer is cancelled on sign-in and in `teardown`, which ends the cycle.
        authTimer = eventLoop.scheduleTask(in: .nanoseconds(Int64(limits.authenticationTimeout * 1e9))) { [self] in
            guard auth == nil else { return }
            closeNow(.policyViolation, reason: "not authenticated in time")
        }
    }

    /// Pings the client, or closes the connection when nothing was heard for the idle timeout.
    /// Called every ping interval on `eventLoop` by its `ConnectionLoop`.
    func keepaliveTick() {
        eventLoop.assertInEventLoop()
        guard let context, !closing else { return }
        if NIODeadline.now() - lastHeard > .nanoseconds(Int64(limits.idleTimeout * 1e9)) {
            closeNow(.policyViolation, reason: "idle for too long")
            return
        }
        // A client that does not read its socket gets no more bytes; the idle timeout above ends it.
        guard context.channel.isWritable else { return }
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0))), promise: nil)
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let frame = unwrapInboundIn(data)
        lastHeard = .now()
        switch frame.opcode {
        case .text:
            let payload = frame.unmaskedData
            guard String(validating: payload.readableBytesView, as: UTF8.self) != nil else {
                closeNow(.invalidPayload, reason: "text frame is not valid UTF-8")
                return
            }
            receive(IncomingRequest.parse(payload.readableBytesView, now: Relay.systemMillis()))
        case .binary:
            metrics.received("binary")
            replyError(ProtocolError(.unsupported, "binary frames are not supported; send JSON in text frames"), to: nil)
        case .ping:
            guard takeControlFrame() else { return }
            // Replaces an unanswered pong: only the latest ping is answered (RFC 6455 5.5.3).
            pendingPong = frame.unmaskedData
        case .pong:
            _ = takeControlFrame()
        case .connectionClose:
            var payload = frame.unmaskedData
            let code = payload.readInteger(as: UInt16.self)
            let valid = code.map(Self.isValidCloseCode) ?? (frame.length == 0)
            // RFC 6455 5.5.1: the reason after the code is UTF-8; anything else fails the connection.
            let reasonIsUTF8 = String(validating: payload.readableBytesView, as: UTF8.self) != nil
            closeNow(!valid ? .protocolError : reasonIsUTF8 ? .normal : .invalidPayload, reason: "")
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        writePendingPong(context: context)
        // Everything this read burst wrote, to this connection and to the observers of its positions.
        loop.flushAll()
        context.fireChannelReadComplete()
    }

    /// Counts a ping or pong against its own bucket; over the limit the connection is closed with 1008.
    private func takeControlFrame() -> Bool {
        guard controlBucket.take() else {
            logger.notice("closing a connection that floods control frames", metadata: ["peer": "\(peer)"])
            closeNow(.policyViolation, reason: "too many control frames")
            return false
        }
        return true
    }

    /// Writes the pong owed, unless replies wait in the queue (it goes after them) or the client does not read.
    private func writePendingPong(context: ChannelHandlerContext) {
        guard let payload = pendingPong, !closing, outbound.isEmpty, context.channel.isWritable else { return }
        pendingPong = nil
        writePong(payload, context: context)
    }

    private func writePong(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: payload)), promise: nil)
        scheduleFlush()
    }

    /// Close codes a peer may send (RFC 6455 section 7.4).
    private static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1011, 3000...4999: return true
        default: return false
        }
    }

    private func receive(_ request: IncomingRequest) {
        metrics.received(request.type)
        guard bucket.take() else {
            replyError(ProtocolError(.rateLimited, "too many requests; slow down"), to: request.id)
            return
        }
        if busy {
            waiting.append(request)
        } else {
            serve(request)
        }
    }

    private func serve(_ incoming: IncomingRequest) {
        let request: Request
        switch incoming.result {
        case .failure(let error): return replyError(error, to: incoming.id)
        case .success(let parsed): request = parsed
        }
        switch request {
        case .ping:
            replyOK(to: incoming.id, [])
        case .position(let position):
            guard let auth else { return replyError(ProtocolError(.unauthenticated, "sign in first"), to: incoming.id) }
            // The latency histogram takes a lock per sample, so only some positions are timed.
            let started = loop.sampleFanoutLatency() ? NIODeadline.now() : nil
            let delivered = relay.publish(position, from: auth.username)
            if let started { metrics.fanoutLatency.recordNanoseconds((NIODeadline.now() - started).nanoseconds) }
            if delivered > 0 { metrics.sent("pos", count: delivered) }
            replyOK(to: incoming.id, [])
        default:
            if auth == nil, !request.isAuthentication {
                return replyError(ProtocolError(.unauthenticated, "sign in first: register, login or hello"), to: incoming.id)
            }
            busy = true
            let id = incoming.id
            relay.serve(request, auth: auth, peer: peer, sink: self) { [self] result in
                eventLoop.execute { self.finish(result, id: id) }
            }
        }
    }

    private func finish(_ result: Result<RelayReply, RelayError>, id: RequestID?) {
        busy = false
        guard context != nil else { return }
        switch result {
        case .success(let reply):
            switch reply.auth {
            case .unchanged: break
            case .authenticated(let newAuth):
                auth = newAuth
                authFailures = 0
                authTimer?.cancel()
                authTimer = nil
                unauthenticatedSlot?.release()
            case .signedOut:
                auth = nil
                startAuthTimer()
            }
            replyOK(to: id, reply.fields)
        case .failure(let error):
            replyError(error.protocolError, to: id)
            if case .unauthenticated = error {
                authFailures += 1
                if authFailures >= limits.maxAuthenticationFailures {
                    closeNow(.policyViolation, reason: "too many failed sign-in attempts")
                    return
                }
            }
        }
        while !busy, !closing, let next = waiting.popFirst() { serve(next) }
    }

    // MARK: Writing

    /// A request without an `id` is answered only when it fails.
    private func replyOK(to id: RequestID?, _ fields: [(String, JSONValue)]) {
        guard let id else { return }
        enqueue(EncodedMessage(Message.ok(re: id, fields)))
    }

    private func replyError(_ error: ProtocolError, to id: RequestID?) {
        metrics.error(error.code)
        enqueue(EncodedMessage(Message.error(re: id, error)))
    }

    func send(_ message: EncodedMessage) {
        // Fan-out calls this from the publisher's event loop: when that is ours, no task hop at all;
        // when it is another of the relay's loops, that loop batches the hop (see `ConnectionLoop`).
        // Order per caller is kept either way.
        if eventLoop.inEventLoop {
            enqueue(message)
        } else if let here = ConnectionLoop.current.currentValue {
            here.forward(message, to: self)
        } else {
            eventLoop.execute { self.enqueue(message) }
        }
    }

    func close(_ code: CloseCode, reason: String) {
        eventLoop.execute { self.closeNow(code, reason: reason) }
    }

    /// Writes `message` now, or queues it while the socket is not writable. On `eventLoop` only.
    func enqueue(_ message: EncodedMessage) {
        guard let context, !closing else { return }
        if outbound.isEmpty, context.channel.isWritable {
            write(message, context: context)
            return
        }
        outbound.append(message)
        if outbound.nonDroppableCount > limits.maxOutboundBacklog || outbound.byteCount > limits.maxOutboundBacklogBytes {
            logger.notice("closing a connection that does not keep up", metadata: ["peer": "\(peer)"])
            closeNow(.policyViolation, reason: "too slow to receive messages")
        }
    }

    private func write(_ message: EncodedMessage, context: ChannelHandlerContext) {
        // A ping that arrived before this message is answered before it, as a client reading in order expects.
        if let pong = pendingPong {
            pendingPong = nil
            writePong(pong, context: context)
        }
        if message.type != "pos" { metrics.sent(message.type) }
        if let frameEncoder {
            // WebSocketFrameEncoder cannot prepend a header to a buffer that all recipients share, so it would
            // write header and payload separately and NIOSSL would seal each as its own TLS record. The message
            // comes framed already; handing it to the handler below the encoder gives one record per delivery.
            frameEncoder.write(NIOAny(message.framed), promise: nil)
        } else {
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: message.bytes)), promise: nil)
        }
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        // One flush for everything written by the same read burst (see `ConnectionLoop`).
        flushScheduled = true
        loop.flushLater(self)
    }

    /// Called by `loop` once the read burst or loop turn that wrote to this connection is done.
    func flushNow() {
        flushScheduled = false
        context?.flush()
    }

    /// Backpressure: while the client does not take what is written to it, nothing more is read from it, so
    /// a client that sends without reading fills its own socket buffers instead of the relay's memory.
    /// Reading resumes once everything queued has been handed to the socket.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        while context.channel.isWritable, let message = outbound.popFirst() {
            write(message, context: context)
        }
        writePendingPong(context: context)
        if !closing { setReading(context.channel.isWritable && outbound.isEmpty, context: context) }
        context.fireChannelWritabilityChanged()
    }

    private func setReading(_ reading: Bool, context: ChannelHandlerContext) {
        guard readingPaused == reading else { return }
        readingPaused = !reading
        try? context.channel.syncOptions?.setOption(.autoRead, value: reading)
    }

    // MARK: Errors and closing

    /// How long the close frame may take to leave before the connection is dropped without it.
    static let closeFrameTimeout = TimeAmount.seconds(2)

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case NIOWebSocketError.invalidFrameLength,
             NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge,
             NIOWebSocketFrameAggregator.Error.tooManyFragments:
            replyError(ProtocolError(.tooLarge, "messages are limited to \(limits.maxMessageBytes) bytes"), to: nil)
            closeNow(.messageTooBig, reason: "message too big")
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error, is FrameValidator.Violation:
            closeNow(.protocolError, reason: "protocol error")
        default:
            logger.debug("connection error", metadata: ["peer": "\(peer)", "error": "\(error)"])
            context.close(promise: nil)
        }
    }

    /// Sends a close frame, then closes the connection once it is written.
    func closeNow(_ code: CloseCode, reason: String) {
        guard let context, !closing else { return }
        closing = true
        pendingPong = nil
        // Nothing the client sends from now on is served; reading it would only cost the loop.
        setReading(false, context: context)
        // A client that does not read would never let the close frame through: drop it at once.
        guard context.channel.isWritable else {
            context.close(promise: nil)
            return
        }
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code.rawValue)
        data.writeString(reason)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
            .whenComplete { _ in loopBound.value.close(promise: nil) }
        // The frame fits under the write buffer's limit, but the client may stop reading right now.
        closeTimer = eventLoop.scheduleTask(in: Self.closeFrameTimeout) { loopBound.value.close(promise: nil) }
    }
}
