import Foundation
import NIOCore
import Synchronization

/// One MQTT 3.1.1 client over TLS: CONNECT, SUBSCRIBE (QoS 0), PUBLISH (QoS 0).
final class MQTTLink: TopicLink, Sendable {
    let socket: BenchSocket
    private let inbox: Inbox
    /// SUBSCRIBE's packet identifier; any task may subscribe.
    private let nextPacketID = Atomic<UInt16>(1)

    /// What arrives on the socket, parsed on its event loop, where all that it keeps lives.
    final class Inbox: ByteReceiver {
        struct State {
            /// Bytes of a packet not complete yet.
            var buffer: ByteBuffer?
            var ackWaiters = CircularBuffer<CheckedContinuation<Void, any Error>>()
            var onMessage: (@Sendable (ByteBuffer) -> Void)?
        }

        let state: NIOLoopBoundBox<State>

        init(eventLoop: any EventLoop) {
            state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
        }

        func received(_ incoming: ByteBuffer, on socket: BenchSocket) {
            state.withValue { state in
                if state.buffer == nil || state.buffer!.readableBytes == 0 {
                    state.buffer = incoming
                } else {
                    var incoming = incoming
                    state.buffer!.writeBuffer(&incoming)
                }
                Self.parse(&state)
            }
        }

        func closed() {
            while let waiter = state.value.ackWaiters.popFirst() { waiter.resume(throwing: BenchError.failed("mqtt: connection closed")) }
        }

        private static func parse(_ state: inout State) {
            while var view = state.buffer, view.readableBytes >= 2 {
                let start = view.readerIndex
                let type = view.getInteger(at: start, as: UInt8.self)!
                var length = 0
                var multiplier = 1
                var offset = 1
                var complete = false
                while offset < 5, let byte = view.getInteger(at: start + offset, as: UInt8.self) {
                    length += Int(byte & 0x7F) * multiplier
                    multiplier *= 128
                    offset += 1
                    if byte & 0x80 == 0 {
                        complete = true
                        break
                    }
                }
                guard complete, view.readableBytes >= offset + length else { return }
                view.moveReaderIndex(forwardBy: offset)
                var body = view.readSlice(length: length)!
                state.buffer = view
                switch type >> 4 {
                case 2, 9:  // CONNACK, SUBACK
                    state.ackWaiters.popFirst()?.resume()
                case 3:  // PUBLISH
                    guard let topicLength = body.readInteger(as: UInt16.self) else { break }
                    body.moveReaderIndex(forwardBy: Int(topicLength))
                    if (type >> 1) & 0x03 > 0 { body.moveReaderIndex(forwardBy: 2) }  // packet id for QoS > 0
                    state.onMessage?(body)
                default:
                    break
                }
            }
            if let view = state.buffer, view.readableBytes == 0 { state.buffer = nil }
        }
    }

    private init(socket: BenchSocket, inbox: Inbox) {
        self.socket = socket
        self.inbox = inbox
    }

    static func connect(_ env: BenchEnvironment, port: Int, source: String?, clientID: String) async throws -> MQTTLink {
        // The loop is chosen first: the inbox keeps its state there and exists before the socket does.
        let loop = env.group.next()
        let inbox = Inbox(eventLoop: loop)
        let socket = try await BenchSocket.connect(group: loop, tls: env.tls, host: "127.0.0.1", port: port, source: source,
                                                   framing: .raw, receiver: inbox)
        let link = MQTTLink(socket: socket, inbox: inbox)
        var body = ByteBuffer()
        Self.writeString("MQTT", into: &body)
        body.writeInteger(UInt8(4))          // protocol level 3.1.1
        body.writeInteger(UInt8(0x02))       // clean session
        body.writeInteger(UInt16(900))       // keepalive (s): longer than any run, so no PINGREQ is needed
        Self.writeString(clientID, into: &body)
        try await link.sendAwaitingAck(type: 0x10, body: body)  // CONNECT, waits for CONNACK
        return link
    }

    /// Hands the payload of every message that arrives to `handler`, on the socket's event loop; from before
    /// the next packet sent.
    func onMessage(_ handler: @escaping @Sendable (ByteBuffer) -> Void) {
        let state = inbox.state
        socket.eventLoop.execute { state.value.onMessage = handler }
    }

    static func writeString(_ string: String, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt16(string.utf8.count))
        buffer.writeString(string)
    }

    static func packet(type: UInt8, body: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        var packet = allocator.buffer(capacity: body.readableBytes + 5)
        packet.writeInteger(type)
        var length = body.readableBytes
        repeat {
            var byte = UInt8(length % 128)
            length /= 128
            if length > 0 { byte |= 0x80 }
            packet.writeInteger(byte)
        } while length > 0
        packet.writeImmutableBuffer(body)
        return packet
    }

    private func sendAwaitingAck(type: UInt8, body: ByteBuffer) async throws {
        let (socket, state) = (socket, inbox.state)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            socket.eventLoop.execute {
                state.value.ackWaiters.append(continuation)
                socket.send(Self.packet(type: type, body: body, allocator: socket.channel.allocator))
            }
        }
    }

    func subscribe(_ topic: String) async throws {
        var body = ByteBuffer()
        body.writeInteger(nextPacketID.wrappingAdd(1, ordering: .relaxed).oldValue)
        Self.writeString(topic, into: &body)
        body.writeInteger(UInt8(0))  // QoS 0
        try await sendAwaitingAck(type: 0x82, body: body)  // SUBSCRIBE, waits for SUBACK
    }

    func publish(_ topic: String, _ payload: ByteBuffer) {
        var body = socket.channel.allocator.buffer(capacity: payload.readableBytes + topic.utf8.count + 2)
        Self.writeString(topic, into: &body)
        body.writeImmutableBuffer(payload)
        socket.send(Self.packet(type: 0x30, body: body, allocator: socket.channel.allocator))
    }
}

/// mosquitto with an MQTT-over-TLS listener (started by bench/peers.sh); one topic per walker, QoS 0.
public final class MQTTDriver: BrokerDriver, Sendable {
    public let name = "mosquitto"
    let env: BenchEnvironment
    let port: Int
    public let pid: Int32?
    private let counter = Mutex(0)

    public init(env: BenchEnvironment, port: Int, pid: Int32?) {
        self.env = env
        self.port = port
        self.pid = pid
    }

    private func clientID() -> String {
        let n = counter.withLock { value in
            value += 1
            return value
        }
        return "bench\(getpid())-\(n)"
    }

    private func connect(_ index: Int) async throws -> MQTTLink {
        try await MQTTLink.connect(env, port: port, source: env.source(index), clientID: clientID())
    }

    public func makeFanout(walkers: Int, observers: Int, sink: DeliverySink) async throws -> FanoutRig {
        let walkerLinks = try await mapConcurrently(walkers, width: 32) { try await self.connect($0) }
        let observerLinks = try await mapConcurrently(walkers * observers, width: 32) { index in
            let link = try await self.connect(index)
            link.onMessage { sink.delivered($0) }
            try await link.subscribe("walker/\(index / observers)")
            return link
        }
        return FanoutRig(publishers: walkerLinks.enumerated().map { TopicWalker(link: $1, index: $0, topic: "walker/\($0)") },
                         sockets: (walkerLinks + observerLinks).map { $0.socket })
    }

    public func prepareConnections() async throws {}

    public func openIdle(source: String?) async throws -> BenchSocket {
        try await MQTTLink.connect(env, port: port, source: source, clientID: clientID()).socket
    }

    public func makeAlarm(recipients: Int) async throws -> any AlarmRig {
        let topic = "alarm/\(clientID())"
        let counter = ArrivalCounter()
        let owner = try await connect(0)
        let links = try await mapConcurrently(recipients, width: 32) { index in
            let link = try await self.connect(index + 1)
            link.onMessage { _ in counter.arrived() }
            try await link.subscribe(topic)
            return link
        }
        return PeerAlarm(counter: counter, recipients: recipients, sockets: ([owner] + links).map { $0.socket }) {
            owner.publish(topic, Payload.peerAlarm(from: "owner", allocator: owner.socket.channel.allocator))
        }
    }
}
