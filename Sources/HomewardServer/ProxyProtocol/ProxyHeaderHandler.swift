import Logging
import NIOCore

/// First handler of a connection from a trusted balancer (`--proxy-protocol-from`): reads its PROXY
/// header, hands the header to `proceed` (which admits the client by its address and adds TLS and HTTP
/// after this handler), passes on the bytes that followed the header, and removes itself.
///
/// A connection whose first bytes are not a valid header, that sends more than the header may take,
/// or that sends none within `timeout`, is closed with a log line: the balancer is misconfigured, or
/// something that is not the balancer connects from its address.
final class ProxyHeaderHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var decoder = ProxyHeaderDecoder()
    private var decoded = false
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    private let logger: Logger
    private let proceed: (ProxyHeader) throws -> Void

    /// `proceed` runs on the channel's event loop, at most once; when it throws, the connection is closed
    /// (it logs its own reason).
    init(timeout: TimeAmount, logger: Logger, proceed: @escaping (ProxyHeader) throws -> Void) {
        self.timeout = timeout
        self.logger = logger
        self.proceed = proceed
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            handler.refuse(context: context, reason: "no PROXY protocol header within \(handler.timeout.nanoseconds / 1_000_000) ms")
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decoded else { return }  // closing after a refusal; nothing more is read
        let action: ProxyHeaderDecoder.Action
        do {
            action = try decoder.feed(unwrapInboundIn(data))
        } catch {
            decoded = true
            refuse(context: context, reason: error.description)
            return
        }
        guard case .decoded(let header, let remainder) = action else { return }
        decoded = true
        timer?.cancel()
        do {
            try proceed(header)
        } catch {
            context.close(promise: nil)
            return
        }
        if remainder.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(remainder)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if decoded { context.fireChannelReadComplete() }
    }

    private func refuse(context: ChannelHandlerContext, reason: String) {
        logger.notice("closing a connection from a PROXY protocol balancer address", metadata: [
            "balancer": "\(context.channel.remoteAddress?.ipAddress ?? "unknown")", "reason": "\(reason)",
        ])
        context.close(promise: nil)
    }
}
