#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// Stops accepting for a while when the process is out of file descriptors (or kernel memory), instead of
/// retrying `accept(2)` in a tight loop.
///
/// The idea is NIO's `AcceptBackoffHandler`, which delays the listening channel's next `read()`. That alone
/// does not stop the spin here: a failed accept leaves the socket registered for readability (NIO only clears
/// its pending read when an accept succeeds), and the connection still waiting in the kernel's backlog
/// keeps it readable, so the loop is woken again at once (measured: ~15 000 failed accepts a second, most
/// of a core). Turning `autoRead` off takes the socket out of the poll set for the pause.
final class AcceptBackoff: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    private let pause: TimeAmount
    private var resume: Scheduled<Void>?

    init(pause: TimeAmount = .seconds(1)) {
        self.pause = pause
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? IOError, Self.isResourceShortage(error.errnoCode), resume == nil {
            try? context.channel.syncOptions?.setOption(.autoRead, value: false)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            resume = context.eventLoop.scheduleTask(in: pause) {
                let (handler, context) = loopBound.value
                handler.resume = nil
                try? context.channel.syncOptions?.setOption(.autoRead, value: true)
            }
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        resume?.cancel()
        resume = nil
        context.fireChannelInactive()
    }

    /// The errors that mean "no resources for another connection now", as in NIO's `AcceptBackoffHandler`.
    static func isResourceShortage(_ code: CInt) -> Bool {
        code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM
    }
}
