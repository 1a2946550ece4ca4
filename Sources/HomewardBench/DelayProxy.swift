import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy on loopback that holds every chunk for `delay` in each direction: PostgreSQL as if it were in
/// another rack or zone (`writes --pg-delay-ms`). It also reads the PostgreSQL frontend protocol the relays
/// send through it and counts the statements they run (`Query` and `Execute` messages), to tell how many a
/// phase of the benchmark cost the database.
///
/// Both sockets of a proxied connection share one event loop; a chunk is written `delay` after it was read,
/// in the order read (NIO runs tasks due at the same time in the order they were scheduled).
public final class DelayProxy: Sendable {
    public let port: Int
    private let channel: any Channel
    let counters: Counters

    /// Statements and connections seen so far.
    public final class Counters: Sendable {
        private let statementCount = Atomic<Int>(0)
        private let connectionCount = Atomic<Int>(0)
        public var statements: Int { statementCount.load(ordering: .relaxed) }
        public var connections: Int { connectionCount.load(ordering: .relaxed) }
        func statement() { statementCount.add(1, ordering: .relaxed) }
        func connection() { connectionCount.add(1, ordering: .relaxed) }
    }

    public var statements: Int { counters.statements }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.channel = channel
        self.counters = counters
    }

    /// Listens on 127.0.0.1:`port` (0: any free port) and forwards to 127.0.0.1:`target`.
    public static func start(group: any EventLoopGroup, port: Int, target: Int, delay: TimeAmount) async throws -> DelayProxy {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { inbound in
                counters.connection()
                return inbound.eventLoop.makeCompletedFuture {
                    try inbound.pipeline.syncOperations.addHandler(DelayedForwarder(target: target, delay: delay, counting: counters))
                }
            }
            .bind(host: "127.0.0.1", port: port)
            .get()
        return DelayProxy(port: channel.localAddress?.port ?? port, channel: channel, counters: counters)
    }

    public func stop() async {
        try? await channel.close()
    }
}

/// Writes what one socket reads to its peer `delay` later; closes the peer when this side closes. On an
/// accepted socket (`target` set) it connects the peer when it becomes active, on its own event loop, and
/// holds what arrives before that; with `counting`, it reads the stream as PostgreSQL frontend messages.
///
/// Like every NIO handler it is not `Sendable`: its state lives on the event loop both sockets share, and
/// the connect's completion reaches it through `NIOLoopBound`.
final class DelayedForwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var peer: (any Channel)?
    private var waiting: [ByteBuffer] = []
    private var closed = false
    let target: Int?
    let delay: TimeAmount
    let counting: DelayProxy.Counters?
    private var frontend = FrontendMessages()

    init(target: Int, delay: TimeAmount, counting: DelayProxy.Counters) {
        self.target = target
        self.delay = delay
        self.counting = counting
    }

    init(peer: any Channel, delay: TimeAmount) {
        self.peer = peer
        self.target = nil
        self.delay = delay
        self.counting = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        guard let target else { return }
        let inbound = context.channel
        let delay = self.delay
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { outbound in
                outbound.eventLoop.makeCompletedFuture {
                    try outbound.pipeline.syncOperations.addHandler(DelayedForwarder(peer: inbound, delay: delay))
                }
            }
            .connect(host: "127.0.0.1", port: target)
            .whenComplete { result in
                let this = loopBound.value
                switch result {
                case .success(let outbound):
                    this.peer = outbound
                    for buffer in this.waiting { this.forward(buffer, on: inbound.eventLoop) }
                    this.waiting = []
                    if this.closed { this.closePeer(on: inbound.eventLoop) }
                case .failure:
                    inbound.close(promise: nil)
                }
            }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if let counting {
            for type in frontend.messageTypes(in: buffer) where type == UInt8(ascii: "Q") || type == UInt8(ascii: "E") {
                counting.statement()
            }
        }
        if peer == nil {
            waiting.append(buffer)
        } else {
            forward(buffer, on: context.eventLoop)
        }
    }

    private func forward(_ buffer: ByteBuffer, on loop: any EventLoop) {
        guard let peer else { return }
        precondition(peer.eventLoop === loop, "both sockets of a proxied connection share one loop")
        if delay == .zero {
            peer.writeAndFlush(buffer, promise: nil)
        } else {
            loop.scheduleTask(in: delay) { peer.writeAndFlush(buffer, promise: nil) }
        }
    }

    private func closePeer(on loop: any EventLoop) {
        guard let peer else { return }
        // After what is still held back, so the peer gets every byte first.
        loop.scheduleTask(in: delay) { peer.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        closePeer(on: context.eventLoop)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The PostgreSQL frontend protocol's framing: a start-up packet (length first, no type byte), then
/// messages of a type byte and a length that counts itself. Reports each message's type as its header is read.
struct FrontendMessages {
    private var startedUp = false
    /// Bytes of the current message (or start-up packet) still to skip.
    private var remaining = 0
    /// A header split across reads.
    private var header: [UInt8] = []

    mutating func messageTypes(in buffer: ByteBuffer) -> [UInt8] {
        var types: [UInt8] = []
        var bytes = buffer.readableBytesView[...]
        while !bytes.isEmpty {
            if remaining > 0 {
                let skip = min(remaining, bytes.count)
                bytes = bytes.dropFirst(skip)
                remaining -= skip
                continue
            }
            let headerLength = startedUp ? 5 : 4
            let take = min(headerLength - header.count, bytes.count)
            header += bytes.prefix(take)
            bytes = bytes.dropFirst(take)
            guard header.count == headerLength else { break }
            let lengthBytes = header.suffix(4)
            let length = lengthBytes.reduce(0) { $0 << 8 | Int($1) }
            if startedUp {
                types.append(header[0])
                remaining = max(0, length - 4)
            } else {
                // The start-up packet (or an SSLRequest, which this benchmark's sslmode=disable never sends).
                startedUp = true
                remaining = max(0, length - 4)
            }
            header = []
        }
        return types
    }
}
