import NIOCore
import NIOTLS

/// Terminates TLS on the system's OpenSSL for one accepted connection: ciphertext from the socket
/// in, plaintext `ByteBuffer`s out to the handlers above, and the reverse for writes. Fires
/// `TLSUserEvent.handshakeCompleted` (as NIOSSL's handler does) once the session is open, and
/// `TLSConnectionError`s through `errorCaught`.
///
/// What to do on each event is `TLSConnectionStateMachine`'s decision; this class only performs it.
/// Nothing is buffered per connection while idle: plaintext buffers are made per read, sized by the
/// ciphertext that arrived, and OpenSSL's own buffers are released between records.
public final class OpenSSLServerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private var machine = TLSConnectionStateMachine()
    private var connection: OpenSSLConnection?
    private let context: OpenSSLServerContext
    /// Writes from above not yet encrypted: held until a flush (and until the handshake completes).
    private var heldWrites: [(bytes: ByteBuffer, promise: EventLoopPromise<Void>?)] = []
    /// The promise of the close that is waiting for the peer's `close_notify`.
    private var closePromise: EventLoopPromise<Void>?
    private var closeTimer: Scheduled<Void>?
    private let closeTimeout: TimeAmount

    /// The name the client asked for in its ClientHello (SNI), once the handshake has completed.
    public private(set) var serverName: String?
    /// "TLSv1.3" or "TLSv1.2", once the handshake has completed.
    public private(set) var protocolVersion: String?
    /// Whether the client resumed an earlier session with a ticket.
    public private(set) var resumedSession = false
    /// Where the connection is (for tests and diagnostics).
    public var state: TLSConnectionStateMachine.State { machine.state }
    /// The OpenSSL session (for tests of what it holds).
    var session: OpenSSLConnection? { connection }

    /// - Parameter closeTimeout: how long a close waits for the peer's `close_notify` before closing anyway.
    public init(context: OpenSSLServerContext, closeTimeout: TimeAmount = .seconds(5)) {
        self.context = context
        self.closeTimeout = closeTimeout
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        guard let made = self.context.makeConnection() else {
            context.fireErrorCaught(TLSConnectionError.handshakeFailed(reason: "OpenSSL could not make a session (out of memory)"))
            context.close(promise: nil)
            return
        }
        connection = made
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        failHeldWrites(ChannelError.ioOnClosedChannel)
        closePromise?.succeed()
        closePromise = nil
        connection = nil
    }

    // MARK: inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        let action = machine.bytesReceived()
        guard action != .discardInput, let connection else { return }
        connection.feed(bytes)
        switch action {
        case .stepHandshake: stepHandshake(context: context, connection)
        case .decrypt: decrypt(context: context, connection)
        default: break
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        closeTimer = nil
        if case .connectionLost(let error) = machine.channelInactive() {
            failHeldWrites(ChannelError.ioOnClosedChannel)
            closePromise?.succeed()
            closePromise = nil
            if let error { context.fireErrorCaught(error) }
        }
        context.fireChannelInactive()
    }

    private func stepHandshake(context: ChannelHandlerContext, _ connection: OpenSSLConnection) {
        let step: TLSConnectionStateMachine.HandshakeStep
        switch connection.handshake() {
        case .completed: step = .completed
        case .wantsMoreBytes: step = .wantsMoreBytes
        case .failed(let error): step = .failed(error)
        }
        perform(machine.handshakeStepped(step), context: context, connection)
    }

    private func decrypt(context: ChannelHandlerContext, _ connection: OpenSSLConnection) {
        var plaintext = context.channel.allocator.buffer(capacity: 0)
        let outcome: TLSConnectionStateMachine.ReadOutcome
        switch connection.read(into: &plaintext) {
        case .wantsMoreBytes: outcome = .wantsMoreBytes
        case .closeNotify: outcome = .closeNotify
        case .failed(let error): outcome = .failed(error)
        }
        // Delivered before the outcome changes the state, so that what the handlers above write in
        // answer to these last bytes still goes out ahead of a close_notify.
        if plaintext.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(plaintext)) }
        perform(machine.decrypted(outcome), context: context, connection)
    }

    // MARK: outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch machine.writeRequested() {
        case .holdWrite: heldWrites.append((unwrapOutboundIn(data), promise))
        case .failWrite(let error): promise?.fail(error)
        default: break
        }
    }

    public func flush(context: ChannelHandlerContext) {
        guard let connection else { return }
        perform(machine.flushRequested(), context: context, connection)
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, let connection else {
            context.close(mode: mode, promise: promise)
            return
        }
        let action = machine.closeRequested()
        switch action {
        case .beginClose, .joinClose:
            if let promise {
                if let closePromise { closePromise.futureResult.cascade(to: promise) } else { closePromise = promise }
            }
            perform(action, context: context, connection)
        default:
            context.close(promise: promise)
        }
    }

    // MARK: actions

    private func perform(_ action: TLSConnectionStateMachine.Action, context: ChannelHandlerContext,
                         _ connection: OpenSSLConnection) {
        switch action {
        case .none, .discardInput, .holdWrite, .failWrite, .joinClose, .connectionLost:
            break
        case .stepHandshake:
            stepHandshake(context: context, connection)
        case .decrypt:
            decrypt(context: context, connection)
        case .sendHandshakeBytes, .sendPending:
            sendOutbound(context: context, connection, promise: nil)
        case .completeHandshake(let flushWrites):
            sendOutbound(context: context, connection, promise: nil)
            serverName = connection.serverName
            protocolVersion = connection.protocolVersion
            resumedSession = connection.resumedSession
            context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: connection.negotiatedProtocol))
            if flushWrites { encryptAndSend(context: context, connection) }
            // The client's first request may have come in the same segment as its Finished.
            decrypt(context: context, connection)
        case .encryptAndSend:
            encryptAndSend(context: context, connection)
        case .fail(let error):
            sendOutbound(context: context, connection, promise: nil)  // the alert, if OpenSSL queued one
            failHeldWrites(error)
            context.fireErrorCaught(error)
            closeChannel(context: context)
        case .answerCloseNotify:
            encryptAndSend(context: context, connection)
            connection.sendCloseNotify()
            sendOutbound(context: context, connection, promise: nil)
            closeChannel(context: context)
        case .beginClose:
            encryptAndSend(context: context, connection)
            connection.sendCloseNotify()
            sendOutbound(context: context, connection, promise: nil)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            closeTimer = context.eventLoop.scheduleTask(in: closeTimeout) {
                let (handler, context) = loopBound.value
                handler.closeTimer = nil
                guard let connection = handler.connection else { return }
                handler.perform(handler.machine.closeTimedOut(), context: context, connection)
            }
        case .finishClose, .closeChannel:
            closeChannel(context: context)
        }
    }

    private func encryptAndSend(context: ChannelHandlerContext, _ connection: OpenSSLConnection) {
        guard !heldWrites.isEmpty else { return }
        let writes = heldWrites
        heldWrites = []
        var promises: [EventLoopPromise<Void>] = []
        promises.reserveCapacity(writes.count)
        for write in writes {
            if let promise = write.promise { promises.append(promise) }
            if let error = connection.write(write.bytes) {
                for promise in promises { promise.fail(error) }
                perform(machine.decrypted(.failed(error)), context: context, connection)
                return
            }
        }
        let combined: EventLoopPromise<Void>?
        switch promises.count {
        case 0: combined = nil
        case 1: combined = promises[0]
        default:
            let all = context.eventLoop.makePromise(of: Void.self)
            let waiting = promises
            all.futureResult.whenComplete { result in for promise in waiting { promise.completeWith(result) } }
            combined = all
        }
        sendOutbound(context: context, connection, promise: combined)
    }

    /// Writes and flushes what OpenSSL produced; completes `promise` with that write (at once when there is none).
    private func sendOutbound(context: ChannelHandlerContext, _ connection: OpenSSLConnection,
                              promise: EventLoopPromise<Void>?) {
        guard let bytes = connection.takeOutbound(allocator: context.channel.allocator) else {
            promise?.succeed()
            return
        }
        context.writeAndFlush(wrapOutboundOut(bytes), promise: promise)
    }

    private func closeChannel(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        closeTimer = nil
        let promise = closePromise
        closePromise = nil
        context.close(promise: promise)
    }

    private func failHeldWrites(_ error: any Error) {
        guard !heldWrites.isEmpty else { return }
        let writes = heldWrites
        heldWrites = []
        for write in writes { write.promise?.fail(error) }
    }
}

@available(*, unavailable)
extension OpenSSLServerHandler: Sendable {}
