import HomewardCore
import HomewardProtocol
import Logging
import NIOCore
import NIOWebSocket

/// One client's WebSocket on its event loop: turns frames into inputs of its `ConnectionStateMachine`,
/// performs the actions it returns, and writes what the relay sends.
///
/// Like every NIO handler it is not `Sendable`: all of its state lives on its channel's event loop.
/// Other threads (the relay's actor, fan-out on other loops) reach it only through its
/// `ConnectionHandle`. Positions, the hot path, are validated and fanned out right here on the loop.
final class WebSocketConnection: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let relay: Relay
    private let limits: ConnectionLimits
    private let metrics: RelayMetrics
    let loop: ConnectionLoop
    private let logger: Logger
    private let peer: String
    /// This connection's place among its address's unauthenticated connections; released on sign-in.
    private let unauthenticatedSlot: UnauthenticatedConnections.Slot?
    /// What the relay and other loops hold to send to this connection.
    let handle: ConnectionHandle

    private var machine: ConnectionStateMachine
    private var context: ChannelHandlerContext?
    private var outbound = OutboundQueue()
    private var flushScheduled = false
    /// Reading stops while the client does not take what is written to it (see `channelWritabilityChanged`).
    private var readingPaused = false
    private var authTimer: Scheduled<Void>?
    private var closeTimer: Scheduled<Void>?
    /// The WebSocket frame encoder's context: messages are written here already framed (see `write`).
    private var frameEncoder: ChannelHandlerContext?

    /// On `loop`'s event loop, where the handler is added.
    init(relay: Relay, limits: ConnectionLimits, metrics: RelayMetrics, loop: ConnectionLoop,
         logger: Logger, peer: String, unauthenticatedSlot: UnauthenticatedConnections.Slot? = nil) {
        self.relay = relay
        self.limits = limits
        self.metrics = metrics
        self.loop = loop
        self.logger = logger
        self.peer = peer
        self.unauthenticatedSlot = unauthenticatedSlot
        self.machine = ConnectionStateMachine(limits: limits)
        self.handle = ConnectionHandle(loop: loop)
    }

    private var eventLoop: any EventLoop { loop.eventLoop }

    // MARK: Life cycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        frameEncoder = try? context.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)
        handle.attach(self)
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
        guard context != nil else { return }
        context = nil
        frameEncoder = nil
        authTimer?.cancel()
        closeTimer?.cancel()
        unauthenticatedSlot?.release()
        loop.remove(self)
        metrics.connections.decrement()
        if let identity = machine.channelClosed() { relay.disconnect(identity.key, sink: handle) }
        // Ends the cycle handler → handle → handler, unless a request is still with the relay: its answer
        // must find this handler (a sign-in answered now has to be undone), and `finish` detaches then.
        if !machine.isServing { handle.detach() }
    }

    private func startAuthTimer() {
        authTimer?.cancel()
        let this = NIOLoopBound(self, eventLoop: eventLoop)
        // The timer holds this handler strongly (a weak reference would give it a side table and slow every
        // retain of it); it is cancelled on sign-in and in `teardown`, which ends the cycle.
        authTimer = eventLoop.scheduleTask(in: .nanoseconds(Int64(limits.authenticationTimeout * 1e9))) {
            this.value.perform(this.value.machine.signInTimedOut())
        }
    }

    /// Pings the client, or closes the connection when nothing was heard for the idle timeout.
    /// Called every ping interval on the event loop by its `ConnectionLoop`.
    func keepaliveTick() {
        guard let context else { return }
        switch machine.keepalive(now: .now(), canWrite: context.channel.isWritable) {
        case .none: break
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0))), promise: nil)
        case .close(let code, let reason):
            closeNow(code, reason: reason)
        }
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !machine.isClosing else { return }
        let frame = unwrapInboundIn(data)
        let now = NIODeadline.now()
        machine.heard(at: now)
        switch frame.opcode {
        case .text:
            let payload = frame.unmaskedData
            guard String(validating: payload.readableBytesView, as: UTF8.self) != nil else {
                closeNow(.invalidPayload, reason: "text frame is not valid UTF-8")
                return
            }
            let request = IncomingRequest.parse(payload.readableBytesView, now: Relay.systemMillis())
            metrics.received(request.type)
            perform(machine.received(request, now: now))
        case .binary:
            metrics.received("binary")
            replyError(ProtocolError(.unsupported, "binary frames are not supported; send JSON in text frames"), to: nil)
        case .ping:
            perform(machine.receivedPing(frame.unmaskedData, now: now))
        case .pong:
            perform(machine.receivedPong(now: now))
        case .connectionClose:
            var payload = frame.unmaskedData
            let code = payload.readInteger(as: UInt16.self)
            // RFC 6455 5.5.1: the reason after the code is UTF-8; anything else fails the connection.
            let reasonIsUTF8 = String(validating: payload.readableBytesView, as: UTF8.self) != nil
            closeNow(ConnectionStateMachine.closeCode(answering: code, frameLength: frame.length, reasonIsUTF8: reasonIsUTF8), reason: "")
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The pong owed for this burst's pings, unless replies wait in the queue (it goes out before the next
        // of them) or the client does not read.
        if let pong = machine.pongToWrite(canWrite: outbound.isEmpty && context.channel.isWritable) {
            writePong(pong, context: context)
        }
        // Everything this read burst wrote, to this connection and to the observers of its positions.
        loop.flushAll()
        context.fireChannelReadComplete()
    }

    // MARK: Actions

    private func perform(_ action: ConnectionStateMachine.RequestAction) {
        switch action {
        case .none:
            break
        case .replyOK(let id):
            replyOK(to: id, [])
        case .replyError(let error, let id):
            replyError(error, to: id)
        case .publish(let position, let username, let id):
            // Some positions are timed; the loop reports the times to the histogram off this path.
            let started = loop.sampleFanoutLatency() ? NIODeadline.now() : nil
            let delivered = relay.publish(position, from: username)
            if let started { loop.recordFanoutLatency(nanoseconds: (NIODeadline.now() - started).nanoseconds) }
            if delivered > 0 { metrics.sent("pos", count: delivered) }
            replyOK(to: id, [])
        case .serve(let request, let auth, let id):
            relay.serve(request, auth: auth, peer: peer, sink: handle) { [handle] result in
                handle.onLoop { $0.finish(result, id: id) }
            }
        }
    }

    private func perform(_ action: ConnectionStateMachine.ControlAction) {
        if case .close(let code, let reason) = action {
            if code == .policyViolation { logger.notice("closing a connection", metadata: ["peer": "\(peer)", "reason": "\(reason)"]) }
            closeNow(code, reason: reason)
        }
    }

    /// The relay answered the request in flight; then the next waiting one, if any, starts.
    private func finish(_ result: Result<RelayReply, RelayError>, id: RequestID?) {
        let served = machine.served(result)
        if let gone = served.detach { relay.disconnect(gone.key, sink: handle) }
        guard context != nil else {
            handle.detach()
            return
        }
        if served.signedIn {
            authTimer?.cancel()
            authTimer = nil
            unauthenticatedSlot?.release()
        }
        if served.signedOut { startAuthTimer() }
        switch served.reply {
        case .success(let fields)?: replyOK(to: id, fields)
        case .failure(let error)?: replyError(error, to: id)
        case nil: break
        }
        if let (code, reason) = served.close {
            closeNow(code, reason: reason)
            return
        }
        while let next = machine.nextWaiting() { perform(next) }
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

    /// Writes `message` now, or queues it while the socket is not writable. On the event loop only.
    func enqueue(_ message: EncodedMessage) {
        guard let context, !machine.isClosing else { return }
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
        if let pong = machine.pongToWrite(canWrite: true) { writePong(pong, context: context) }
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

    private func writePong(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: payload)), promise: nil)
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
        if let pong = machine.pongToWrite(canWrite: outbound.isEmpty && context.channel.isWritable) {
            writePong(pong, context: context)
        }
        if !machine.isClosing { setReading(context.channel.isWritable && outbound.isEmpty, context: context) }
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

    /// Sends a close frame, then closes the connection once it is written, or after `closeFrameTimeout` without it.
    func closeNow(_ code: CloseCode, reason: String) {
        guard let loopBound = sendCloseFrame(code, reason: reason) else { return }
        // The client may not read the frame (or what the socket still holds before it) in time.
        closeTimer = eventLoop.scheduleTask(in: Self.closeFrameTimeout) { loopBound.value.close(promise: nil) }
    }

    /// `closeNow` with no timer of its own: whoever calls this (`ConnectionLoop.closeAll`) closes the connection
    /// with `drop` if it is still open after a while.
    func closeWithoutTimer(_ code: CloseCode, reason: String) {
        _ = sendCloseFrame(code, reason: reason)
    }

    /// Closes the connection now, whether its close frame has left or not (at shutdown, once the grace is over).
    func drop() {
        context?.close(promise: nil)
    }

    /// Sends a close frame and closes the connection once it is written; returns the context to close it by
    /// when it is not (nil: closing already).
    private func sendCloseFrame(_ code: CloseCode, reason: String) -> NIOLoopBound<ChannelHandlerContext>? {
        guard let context, machine.startClosing() else { return nil }
        // Nothing the client sends from now on is served; reading it would only cost the loop.
        setReading(false, context: context)
        // The close frame goes ahead of whatever still waits for a slow client (those messages are dropped),
        // so a client that reads again learns why it was dropped instead of seeing a bare end of stream;
        // one that never reads is cut off by the timer below.
        outbound = OutboundQueue()
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code.rawValue)
        data.writeString(reason)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
            .whenComplete { _ in loopBound.value.close(promise: nil) }
        return loopBound
    }
}
