import Foundation
import HomewardNATS
import NIOCore
import Synchronization

/// One NATS client connection over WSS speaking the NATS text protocol. It must go over WebSocket and
/// TLS to load nats-server the way Homeward's clients load the relay, which `NATSClient` (plain TCP)
/// does not do; so it reuses only `HomewardNATS`'s encoder (`NATSClientCommand`) and streaming parser
/// (`NATSParser`: WebSocket frames do not align with protocol messages).
final class NATSLink: TopicLink, Sendable {
    let socket: BenchSocket
    private let inbox: Inbox

    /// What arrives on the socket, parsed on its event loop, where all that it keeps lives.
    final class Inbox: ByteReceiver {
        struct State {
            var parser = NATSParser()
            var pongWaiters = CircularBuffer<CheckedContinuation<Void, any Error>>()
            var onMessage: (@Sendable (ByteBuffer) -> Void)?
        }

        let state: NIOLoopBoundBox<State>

        init(eventLoop: any EventLoop) {
            state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
        }

        func received(_ incoming: ByteBuffer, on socket: BenchSocket) {
            state.withValue { state in
                state.parser.append(incoming)
                do {
                    while let op = try state.parser.next() {
                        switch op {
                        case .message(let message): state.onMessage?(message.payload)
                        case .ping: socket.send(NATSClientCommand.pong.encoded())
                        case .pong: state.pongWaiters.popFirst()?.resume()
                        case .error(let text): FileHandle.standardError.write(Data("nats: -ERR \(text)\n".utf8))
                        case .info, .ok: break
                        }
                    }
                } catch {
                    FileHandle.standardError.write(Data("nats: \(error)\n".utf8))
                    socket.close()
                }
            }
        }

        func closed() {
            while let waiter = state.value.pongWaiters.popFirst() { waiter.resume(throwing: BenchError.failed("nats: connection closed")) }
        }
    }

    private init(socket: BenchSocket, inbox: Inbox) {
        self.socket = socket
        self.inbox = inbox
    }

    static func connect(_ env: BenchEnvironment, port: Int, source: String?) async throws -> NATSLink {
        // The loop is chosen first: the inbox keeps its state there and exists before the socket does.
        let loop = env.group.next()
        let inbox = Inbox(eventLoop: loop)
        let socket = try await BenchSocket.connect(group: loop, tls: env.tls, host: "127.0.0.1", port: port, source: source,
                                                   framing: .webSocket(path: "/", subprotocol: nil), receiver: inbox)
        let link = NATSLink(socket: socket, inbox: inbox)
        socket.send(NATSClientCommand.connect(NATSConnectOptions(name: "bench")).encoded())
        try await link.ping()
        return link
    }

    /// Hands the payload of every message that arrives to `handler`, on the socket's event loop; from before
    /// the next command sent.
    func onMessage(_ handler: @escaping @Sendable (ByteBuffer) -> Void) {
        let state = inbox.state
        socket.eventLoop.execute { state.value.onMessage = handler }
    }

    /// Round trip: everything sent before it has been processed by the server.
    func ping() async throws {
        let (socket, state) = (socket, inbox.state)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            socket.eventLoop.execute {
                state.value.pongWaiters.append(continuation)
                socket.send(NATSClientCommand.ping.encoded())
            }
        }
    }

    func subscribe(_ subject: String, sid: Int) async throws {
        socket.send(NATSClientCommand.subscribe(subject: subject, queueGroup: nil, subscriptionID: UInt64(sid)).encoded())
        try await ping()
    }

    func publish(_ subject: String, _ payload: ByteBuffer) {
        socket.send(NATSClientCommand.publish(subject: subject, replyTo: nil, payload: payload).encoded(allocator: socket.channel.allocator))
    }
}

/// nats-server with its WebSocket listener over TLS (started by bench/peers.sh); one subject per walker.
public final class NATSDriver: BrokerDriver, Sendable {
    public let name = "nats"
    let env: BenchEnvironment
    let port: Int
    public let pid: Int32?
    private let alarmCounter = Mutex(0)

    public init(env: BenchEnvironment, port: Int, pid: Int32?) {
        self.env = env
        self.port = port
        self.pid = pid
    }

    public func makeFanout(walkers: Int, observers: Int, sink: DeliverySink) async throws -> FanoutRig {
        let walkerLinks = try await mapConcurrently(walkers, width: 32) { index in
            try await NATSLink.connect(self.env, port: self.port, source: self.env.source(index))
        }
        let observerLinks = try await mapConcurrently(walkers * observers, width: 32) { index in
            let link = try await NATSLink.connect(self.env, port: self.port, source: self.env.source(index))
            link.onMessage { sink.delivered($0) }
            try await link.subscribe("walker.\(index / observers)", sid: 1)
            return link
        }
        return FanoutRig(publishers: walkerLinks.enumerated().map { TopicWalker(link: $1, index: $0, topic: "walker.\($0)") },
                         sockets: (walkerLinks + observerLinks).map { $0.socket })
    }

    public func prepareConnections() async throws {}

    public func openIdle(source: String?) async throws -> BenchSocket {
        try await NATSLink.connect(env, port: port, source: source).socket
    }

    public func makeAlarm(recipients: Int) async throws -> any AlarmRig {
        let number = alarmCounter.withLock { value in
            value += 1
            return value
        }
        let subject = "alarm.owner\(number)"
        let counter = ArrivalCounter()
        let owner = try await NATSLink.connect(env, port: port, source: env.source(0))
        let links = try await mapConcurrently(recipients, width: 32) { index in
            let link = try await NATSLink.connect(self.env, port: self.port, source: self.env.source(index + 1))
            link.onMessage { _ in counter.arrived() }
            try await link.subscribe(subject, sid: 1)
            return link
        }
        return PeerAlarm(counter: counter, recipients: recipients, sockets: ([owner] + links).map { $0.socket }) {
            owner.publish(subject, Payload.peerAlarm(from: "owner\(number)", allocator: owner.socket.channel.allocator))
        }
    }
}

/// A peer's alarm: one message published to a subject/topic every recipient subscribes to.
struct PeerAlarm: AlarmRig {
    let counter: ArrivalCounter
    let recipients: Int
    let sockets: [BenchSocket]
    let send: @Sendable () -> Void

    func raise() async throws -> UInt64? {
        counter.arm(expected: recipients)
        send()
        return await counter.wait(timeout: 10)
    }

    func close() async {
        for socket in sockets { socket.close() }
    }
}
