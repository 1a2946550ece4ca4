import NIOCore
import NIOWebSocket

/// The last handler of a client WebSocket pipeline: answers pings, completes the closing
/// handshake, notices a silent peer, and passes text messages up as `SocketEvent`s.
///
/// Runs entirely on the channel's event loop, so keepalive keeps working while the code
/// above is busy.
final class WebSocketFrameRouter: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// Sent down the pipeline to close politely: a close frame, then TCP once the relay answers.
    struct CloseRequest: Sendable {
        var code: UInt16 = 1000
        /// How long to wait for the relay's close frame before dropping the connection.
        var grace: TimeAmount = .seconds(1)
    }

    private let events: AsyncStream<SocketEvent>.Continuation
    /// The relay pings every 25 s; hearing nothing for this long means the connection is dead
    /// even if TCP has not noticed (a laptop lid, a NAT timeout).
    private let silenceLimit: TimeAmount
    private var lastHeard = NIODeadline.now()
    private var watchdog: RepeatedTask?
    private var closure: SocketClosure?
    private var sentClose = false
    private var finished = false

    init(events: AsyncStream<SocketEvent>.Continuation, silenceLimit: TimeAmount) {
        self.events = events
        self.silenceLimit = silenceLimit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let check = TimeAmount.nanoseconds(max(silenceLimit.nanoseconds / 4, 1_000_000))
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        watchdog = context.eventLoop.scheduleRepeatedTask(initialDelay: check, delay: check) { _ in
            let router = handler.value
            guard NIODeadline.now() - router.lastHeard > router.silenceLimit else { return }
            router.closure = router.closure ?? SocketClosure(code: nil, reason: "the relay went silent")
            loopBound.value.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        watchdog?.cancel()
        finish()
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastHeard = .now()
        switch frame.opcode {
        case .text:
            events.yield(.text(frame.unmaskedData))
        case .ping:
            var payload = frame.unmaskedData
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(),
                                      data: payload.readSlice(length: payload.readableBytes) ?? payload)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            var payload = frame.unmaskedData
            let code = payload.readInteger(as: UInt16.self)
            let reason = payload.readString(length: payload.readableBytes) ?? ""
            closure = SocketClosure(code: code, reason: reason)
            sendClose(context: context, code: code ?? 1000, thenClose: true)
        default:
            break  // binary frames and pongs carry nothing for us
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let request = event as? CloseRequest else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        closure = closure ?? SocketClosure(code: request.code, reason: "closed by the client")
        sendClose(context: context, code: request.code, thenClose: false)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: request.grace) { loopBound.value.close(promise: nil) }
        promise?.succeed()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        closure = closure ?? SocketClosure(code: nil, reason: "connection error: \(error)")
        context.close(promise: nil)
    }

    /// Writes a close frame (once), then closes the TCP connection when it is out.
    func sendClose(context: ChannelHandlerContext, code: UInt16, thenClose: Bool) {
        guard !sentClose else {
            if thenClose { context.close(promise: nil) }
            return
        }
        sentClose = true
        var data = context.channel.allocator.buffer(capacity: 2)
        data.writeInteger(code)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let written = context.writeAndFlush(wrapOutboundOut(frame))
        if thenClose { written.whenComplete { _ in loopBound.value.close(promise: nil) } }
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        events.yield(.closed(closure ?? SocketClosure(code: nil, reason: "connection lost")))
        events.finish()
    }
}
