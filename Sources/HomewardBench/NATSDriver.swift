import Foundation
import NIOCore
import Synchronization

/// One NATS client connection over WSS speaking the NATS text protocol (INFO, CONNECT, PUB, SUB,
/// MSG, PING, PONG). WebSocket frames do not align with protocol messages, so this parses a stream.
final class NATSLink: ByteReceiver, TopicLink, @unchecked Sendable {
    // Confined to the socket's event loop.
    private var buffer: ByteBuffer?
    private var pongWaiters = CircularBuffer<CheckedContinuation<Void, any Error>>()
    var onMessage: (@Sendable (ByteBuffer) -> Void)?
    private(set) var socket: BenchSocket!

    static func connect(_ env: BenchEnvironment, port: Int, source: String?) async throws -> NATSLink {
        let link = NATSLink()
        link.socket = try await BenchSocket.connect(group: env.group, tls: env.tls, host: "127.0.0.1", port: port, source: source,
                                                    framing: .webSocket(path: "/", subprotocol: nil), receiver: link)
        link.socket.send(ByteBuffer(string: "CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1,\"name\":\"bench\"}\r\n"))
        try await link.ping()
        return link
    }

    /// Round trip: everything sent before it has been processed by the server.
    func ping() async throws {
        let loop = socket.eventLoop
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            loop.execute {
                self.pongWaiters.append(continuation)
                self.socket.send(ByteBuffer(string: "PING\r\n"))
            }
        }
    }

    func subscribe(_ subject: String, sid: Int) async throws {
        socket.send(ByteBuffer(string: "SUB \(subject) \(sid)\r\n"))
        try await ping()
    }

    func publish(_ subject: String, _ payload: ByteBuffer) {
        var frame = socket.channel.allocator.buffer(capacity: payload.readableBytes + subject.utf8.count + 20)
        frame.writeStaticString("PUB ")
        frame.writeString(subject)
        frame.writeInteger(UInt8(ascii: " "))
        frame.writeString(String(payload.readableBytes))
        frame.writeStaticString("\r\n")
        frame.writeImmutableBuffer(payload)
        frame.writeStaticString("\r\n")
        socket.send(frame)
    }

    func received(_ incoming: ByteBuffer, on socket: BenchSocket) {
        if buffer == nil || buffer!.readableBytes == 0 {
            buffer = incoming
        } else {
            var incoming = incoming
            buffer!.writeBuffer(&incoming)
        }
        parse()
    }

    func closed() {
        while let waiter = pongWaiters.popFirst() { waiter.resume(throwing: BenchError.failed("nats: connection closed")) }
    }

    /// The number at the end of a protocol line ("... 123\r\n").
    static func trailingNumber(_ line: ByteBuffer) -> Int? {
        line.withUnsafeReadableBytes { bytes -> Int? in
            var end = bytes.count
            while end > 0, bytes[end - 1] == 10 || bytes[end - 1] == 13 || bytes[end - 1] == 32 { end -= 1 }
            var start = end
            while start > 0, bytes[start - 1] >= 48, bytes[start - 1] <= 57 { start -= 1 }
            guard start < end else { return nil }
            var value = 0
            for index in start..<end { value = value * 10 + Int(bytes[index] - 48) }
            return value
        }
    }

    private func parse() {
        while var view = buffer, view.readableBytes > 0 {
            guard let lineEnd = view.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else { break }
            let lineLength = lineEnd - view.readerIndex + 1
            let line = view.getSlice(at: view.readerIndex, length: lineLength)!
            let first = line.getInteger(at: line.readerIndex, as: UInt8.self) ?? 0
            switch first {
            case UInt8(ascii: "M"):
                // MSG <subject> <sid> [reply-to] <#bytes>\r\n<payload>\r\n
                guard let size = Self.trailingNumber(line) else { buffer = nil; return }
                guard view.readableBytes >= lineLength + size + 2 else { return }
                view.moveReaderIndex(forwardBy: lineLength)
                let payload = view.readSlice(length: size)!
                view.moveReaderIndex(forwardBy: 2)
                buffer = view
                onMessage?(payload)
                continue
            case UInt8(ascii: "P"):
                let text = String(buffer: line)
                if text.hasPrefix("PING") {
                    socket.send(ByteBuffer(string: "PONG\r\n"))
                } else if text.hasPrefix("PONG") {
                    pongWaiters.popFirst()?.resume()
                }
            case UInt8(ascii: "-"):
                FileHandle.standardError.write(Data("nats: \(String(buffer: line))".utf8))
            default:
                break // INFO, +OK
            }
            view.moveReaderIndex(forwardBy: lineLength)
            buffer = view
        }
        if let view = buffer, view.readableBytes == 0 { buffer = nil }
    }
}

/// nats-server with its WebSocket listener over TLS (started by bench/peers.sh); one subject per walker.
public final class NATSDriver: BrokerDriver, @unchecked Sendable {
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
            link.onMessage = { sink.delivered($0) }
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
            link.onMessage = { _ in counter.arrived() }
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
