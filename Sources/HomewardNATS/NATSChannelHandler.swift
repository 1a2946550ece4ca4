import NIOCore

/// One socket to a NATS server: parses what it reads and hands each protocol message to the core.
/// It carries the id of its connection attempt, so that the core can ignore a socket it has already
/// given up. Not `Sendable`: it lives on the core's event loop, like the core.
final class NATSChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let core: NATSClientCore
    private let connection: NATSConnectionStateMachine.ConnectionID
    private var parser = NATSParser()
    /// The stream was not NATS; nothing more is read from it.
    private var failed = false

    init(core: NATSClientCore, connection: NATSConnectionStateMachine.ConnectionID) {
        self.core = core
        self.connection = connection
    }

    func channelActive(context: ChannelHandlerContext) {
        core.channelActive(context.channel, connection: connection)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        parser.append(unwrapInboundIn(data))
        do {
            while let op = try parser.next() {
                core.received(op, connection: connection)
            }
        } catch {
            failed = true
            core.connectionFailed(connection, reason: error.description)
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        core.connectionFailed(connection, reason: "connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        core.connectionFailed(connection, reason: "\(error)")
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension NATSChannelHandler: Sendable {}
