import Foundation
import HomewardProtocol
import HomewardTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization

/// What the client's channel handler reports, in arrival order.
enum ClientInbound: Sendable {
    case message(JSONValue)
    case closeFrame(UInt16?)
    case ping
}

/// Messages received but not yet taken by the test, plus whoever waits for one.
actor ClientInbox {
    private struct Waiter {
        let match: @Sendable (JSONValue) -> Bool
        let continuation: CheckedContinuation<JSONValue, any Error>
    }

    private var messages: [JSONValue] = []
    private var waiters: [Int: Waiter] = [:]
    private var closeWaiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    private var cancelled: Set<Int> = []
    private var pingWaiters: [Int: (count: Int, continuation: CheckedContinuation<Void, any Error>)] = [:]
    private(set) var pings = 0
    private(set) var closeFrameCode: UInt16?
    private(set) var sawCloseFrame = false
    private(set) var ended = false
    /// Everything ever received, for failure messages.
    private var transcript: [String] = []

    func push(_ item: ClientInbound) {
        switch item {
        case .message(let value):
            transcript.append(JSONWriter.string(value))
            if let (id, waiter) = waiters.first(where: { $0.value.match(value) }) {
                waiters[id] = nil
                waiter.continuation.resume(returning: value)
            } else {
                messages.append(value)
            }
        case .closeFrame(let code):
            transcript.append("<close \(code.map(String.init) ?? "no code")>")
            if !sawCloseFrame {
                sawCloseFrame = true
                closeFrameCode = code
            }
            resumeCloseWaiters()
        case .ping:
            pings += 1
            for (token, waiter) in pingWaiters where waiter.count <= pings {
                pingWaiters[token] = nil
                waiter.continuation.resume()
            }
        }
    }

    func finish() {
        ended = true
        transcript.append("<channel closed>")
        resumeCloseWaiters()
        let pending = waiters
        waiters = [:]
        for waiter in pending.values {
            waiter.continuation.resume(throwing: TestFailure("the connection closed; received: \(recent)"))
        }
        let pingers = pingWaiters
        pingWaiters = [:]
        for waiter in pingers.values {
            waiter.continuation.resume(throwing: TestFailure("the connection closed after \(pings) pings"))
        }
    }

    private func resumeCloseWaiters() {
        let pending = closeWaiters
        closeWaiters = [:]
        for continuation in pending.values { continuation.resume() }
    }

    var recent: String { transcript.suffix(12).joined(separator: " | ") }

    /// Takes the first buffered message matching `match`, or waits for one.
    func take(_ token: Int, _ match: @escaping @Sendable (JSONValue) -> Bool) async throws -> JSONValue {
        if let index = messages.firstIndex(where: match) { return messages.remove(at: index) }
        if cancelled.remove(token) != nil { throw CancellationError() }
        if ended { throw TestFailure("the connection is closed; received: \(recent)") }
        return try await withCheckedThrowingContinuation { continuation in
            waiters[token] = Waiter(match: match, continuation: continuation)
        }
    }

    /// Waits until a close frame arrived or the channel closed.
    func waitForClose(_ token: Int) async throws {
        if sawCloseFrame || ended { return }
        if cancelled.remove(token) != nil { throw CancellationError() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            closeWaiters[token] = continuation
        }
    }

    /// Waits until the relay has sent `count` WebSocket pings in all.
    func waitForPings(_ token: Int, _ count: Int) async throws {
        if pings >= count { return }
        if cancelled.remove(token) != nil { throw CancellationError() }
        if ended { throw TestFailure("the connection closed after \(pings) pings") }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            pingWaiters[token] = (count, continuation)
        }
    }

    func cancel(_ token: Int) {
        if let waiter = pingWaiters.removeValue(forKey: token) {
            waiter.continuation.resume(throwing: CancellationError())
        } else if let waiter = waiters.removeValue(forKey: token) {
            waiter.continuation.resume(throwing: CancellationError())
        } else if let continuation = closeWaiters.removeValue(forKey: token) {
            continuation.resume(throwing: CancellationError())
        } else {
            cancelled.insert(token)
        }
    }

    /// Removes and returns every buffered message matching `match`, without waiting.
    func drain(_ match: (JSONValue) -> Bool) -> [JSONValue] {
        let matching = messages.filter(match)
        messages.removeAll(where: match)
        return matching
    }

    var buffered: [JSONValue] { messages }
}

/// Parses the relay's frames and answers its pings; runs on the channel's event loop.
final class ClientFrameHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let continuation: AsyncStream<ClientInbound>.Continuation
    private let answerPings: Bool

    init(continuation: AsyncStream<ClientInbound>.Continuation, answerPings: Bool) {
        self.continuation = continuation
        self.answerPings = answerPings
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            let payload = frame.unmaskedData
            let text = String(buffer: payload)
            if let value = try? JSONParser.parse(payload.readableBytesView) {
                continuation.yield(.message(value))
            } else {
                continuation.yield(.message(["type": "<unparseable>", "raw": .string(text)]))
            }
        case .binary:
            continuation.yield(.message(["type": "<binary>"]))
        case .connectionClose:
            var payload = frame.unmaskedData
            continuation.yield(.closeFrame(payload.readInteger(as: UInt16.self)))
        case .ping:
            continuation.yield(.ping)
            if answerPings {
                let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
                context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        continuation.finish()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS shutdown noise and decoding errors alike: the connection is over.
        context.close(promise: nil)
    }
}

/// A WebSocket client over TLS that speaks the Homeward protocol, for end-to-end tests.
final class TestClient: Sendable {
    static let defaultTimeout: Double = 10

    let channel: any Channel
    /// The `Sec-WebSocket-Protocol` the relay selected, if any.
    let selectedSubprotocol: String?
    private let inbox: ClientInbox
    private let pump: Task<Void, Never>
    private let counter = Mutex<Int>(0)
    /// Set by `connect` helpers that sign in; informational only.
    let label: String

    private init(channel: any Channel, selectedSubprotocol: String?, inbox: ClientInbox, pump: Task<Void, Never>,
                 label: String) {
        self.channel = channel
        self.selectedSubprotocol = selectedSubprotocol
        self.inbox = inbox
        self.pump = pump
        self.label = label
    }

    private enum UpgradeResult: Sendable {
        case upgraded(any Channel, String?)
        case notUpgraded(any Channel)
    }

    /// Makes a TLS context that trusts only `caPath`.
    static func tlsContext(trusting caPath: String) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caPath)
        return try NIOSSLContext(configuration: tls)
    }

    /// Connects to `127.0.0.1:port` over TLS (server name `localhost`) and upgrades `path` to a WebSocket.
    /// `answerPings: false` makes a client that never sends pongs, to test the idle timeout.
    /// `preamble` is sent before the TLS handshake (a PROXY protocol header, as a balancer would send).
    static func connect(port: Int, caPath: String, path: String = "/v1/ws", subprotocol: String? = nil,
                        label: String = "client", answerPings: Bool = true, preamble: [UInt8] = [],
                        timeout: Double = defaultTimeout) async throws -> TestClient {
        let sslContext = try tlsContext(trusting: caPath)
        let (stream, continuation) = AsyncStream.makeStream(of: ClientInbound.self)
        let result: UpgradeResult = try await withTimeout(timeout, "the WebSocket upgrade of \(label)") {
            let negotiated: EventLoopFuture<UpgradeResult> = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(5))
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if !preamble.isEmpty { try sync.addHandler(PreambleWriter(preamble)) }
                        try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                        let upgrader = NIOTypedWebSocketClientUpgrader<UpgradeResult>(
                            maxFrameSize: 1 << 20, enableAutomaticErrorHandling: false,
                            upgradePipelineHandler: { channel, response in
                                channel.eventLoop.makeCompletedFuture {
                                    try channel.pipeline.syncOperations.addHandler(
                                        ClientFrameHandler(continuation: continuation, answerPings: answerPings))
                                    return UpgradeResult.upgraded(
                                        channel, response.headers.first(name: "Sec-WebSocket-Protocol"))
                                }
                            })
                        var headers = HTTPHeaders()
                        headers.add(name: "Host", value: "localhost:\(port)")
                        if let subprotocol { headers.add(name: "Sec-WebSocket-Protocol", value: subprotocol) }
                        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
                        let configuration = NIOTypedHTTPClientUpgradeConfiguration<UpgradeResult>(
                            upgradeRequestHead: head, upgraders: [upgrader],
                            notUpgradingCompletionHandler: { channel in
                                channel.eventLoop.makeCompletedFuture { UpgradeResult.notUpgraded(channel) }
                            })
                        return try sync.configureUpgradableHTTPClientPipeline(
                            configuration: .init(upgradeConfiguration: configuration))
                    }
                }
            return try await negotiated.get()
        }
        switch result {
        case .notUpgraded(let channel):
            try? await channel.close()
            continuation.finish()
            throw TestFailure("the relay refused the WebSocket upgrade of \(path)")
        case .upgraded(let channel, let selected):
            let inbox = ClientInbox()
            let pump = Task {
                for await item in stream { await inbox.push(item) }
                await inbox.finish()
            }
            return TestClient(channel: channel, selectedSubprotocol: selected, inbox: inbox, pump: pump, label: label)
        }
    }

    // MARK: Sending

    /// Sends one masked text frame.
    func send(_ text: String) async throws {
        try await sendFrame(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text)))
    }

    func send(_ value: JSONValue) async throws {
        try await send(JSONWriter.string(value))
    }

    /// Sends a frame exactly as given (masking only if it has a mask key), for malformed input.
    func sendFrame(_ frame: WebSocketFrame) async throws {
        try await channel.writeAndFlush(frame)
    }

    private func nextID() -> Int64 {
        counter.withLock { value in
            value += 1
            return Int64(value)
        }
    }

    // MARK: Requests

    /// Sends a request with a fresh integer id and returns the reply carrying it as `re`.
    /// Events that arrive meanwhile stay buffered for `event(_:)`.
    func request(_ type: String, _ fields: [(String, JSONValue)] = [], timeout: Double = defaultTimeout) async throws -> JSONValue {
        let id = nextID()
        try await send(.object([("type", .string(type)), ("id", .int(id))] + fields))
        return try await waitFor("the reply to \(type) #\(id)", timeout: timeout) { $0["re"] == .int(id) }
    }

    func request(_ type: String, _ fields: KeyValuePairs<String, JSONValue>, timeout: Double = defaultTimeout) async throws -> JSONValue {
        try await request(type, fields.map { ($0.key, $0.value) }, timeout: timeout)
    }

    /// Like `request`, but the reply must be `ok`.
    @discardableResult
    func ok(_ type: String, _ fields: [(String, JSONValue)] = [], timeout: Double = defaultTimeout) async throws -> JSONValue {
        let reply = try await request(type, fields, timeout: timeout)
        guard reply["type"] == "ok" else {
            throw TestFailure("\(label): \(type) \(JSONWriter.string(.object(fields))) was refused: \(JSONWriter.string(reply))")
        }
        return reply
    }

    @discardableResult
    func ok(_ type: String, _ fields: KeyValuePairs<String, JSONValue>, timeout: Double = defaultTimeout) async throws -> JSONValue {
        try await ok(type, fields.map { ($0.key, $0.value) }, timeout: timeout)
    }

    /// Like `request`, but the reply must be an error; returns its code.
    func failure(_ type: String, _ fields: [(String, JSONValue)] = [], timeout: Double = defaultTimeout) async throws -> String {
        let reply = try await request(type, fields, timeout: timeout)
        guard reply["type"] == "error", let code = reply["code"]?.stringValue else {
            throw TestFailure("\(label): expected \(type) \(JSONWriter.string(.object(fields))) to fail, got \(JSONWriter.string(reply))")
        }
        return code
    }

    func failure(_ type: String, _ fields: KeyValuePairs<String, JSONValue>, timeout: Double = defaultTimeout) async throws -> String {
        try await failure(type, fields.map { ($0.key, $0.value) }, timeout: timeout)
    }

    // MARK: Receiving

    /// The next event (a message without `re`) of `type`, buffered or still to come.
    @discardableResult
    func event(_ type: String, timeout: Double = defaultTimeout,
               where predicate: @escaping @Sendable (JSONValue) -> Bool = { _ in true }) async throws -> JSONValue {
        try await waitFor("a \(type) event", timeout: timeout) { message in
            message["re"] == nil && message["type"]?.stringValue == type && predicate(message)
        }
    }

    /// The next message of any kind matching `match`.
    func waitFor(_ what: String, timeout: Double = defaultTimeout,
                 _ match: @escaping @Sendable (JSONValue) -> Bool) async throws -> JSONValue {
        let inbox = self.inbox
        let token = Int(nextID())
        do {
            return try await withTimeout(timeout, "\(what) on \(label)") {
                try await withTaskCancellationHandler {
                    try await inbox.take(token, match)
                } onCancel: {
                    Task { await inbox.cancel(token) }
                }
            }
        } catch let failure as TestFailure {
            throw TestFailure("\(failure.description); recently received: \(await inbox.recent)")
        }
    }

    /// Makes a round trip so that everything the relay sent before it has arrived, then removes and returns
    /// the buffered events of `type`. Used to prove that something did not arrive.
    ///
    /// The default round trip is `session.list`: the relay serves it on the same queue that sends events, after
    /// the connection's event loop has run everything queued for it, so it orders after both events and positions.
    /// Unauthenticated connections must use `ping`, which covers only what the event loop already had queued.
    func eventsAfterRoundTrip(_ type: String, roundTrip: String = "session.list") async throws -> [JSONValue] {
        try await messagesAfterRoundTrip(roundTrip: roundTrip) { $0["re"] == nil && $0["type"]?.stringValue == type }
    }

    /// Like `eventsAfterRoundTrip`, for messages of any kind matching `match`.
    func messagesAfterRoundTrip(roundTrip: String = "session.list",
                                _ match: @escaping @Sendable (JSONValue) -> Bool) async throws -> [JSONValue] {
        try await ok(roundTrip)
        return await inbox.drain(match)
    }

    /// Waits for the relay's close frame (or the connection closing without one); returns the close code.
    func closeCode(timeout: Double = defaultTimeout) async throws -> UInt16? {
        let inbox = self.inbox
        let token = Int(nextID())
        try await withTimeout(timeout, "the relay to close \(label)") {
            try await withTaskCancellationHandler {
                try await inbox.waitForClose(token)
            } onCancel: {
                Task { await inbox.cancel(token) }
            }
        }
        return await inbox.closeFrameCode
    }

    /// Waits until the relay has sent `count` WebSocket pings on this connection in all.
    func waitForPings(_ count: Int, timeout: Double = defaultTimeout) async throws {
        let inbox = self.inbox
        let token = Int(nextID())
        try await withTimeout(timeout, "\(count) pings on \(label)") {
            try await withTaskCancellationHandler {
                try await inbox.waitForPings(token, count)
            } onCancel: {
                Task { await inbox.cancel(token) }
            }
        }
    }

    /// Waits until the TCP connection itself is closed.
    func waitUntilClosed(timeout: Double = defaultTimeout) async throws {
        let channel = self.channel
        try await withTimeout(timeout, "\(label)'s connection to close") {
            try await channel.closeFuture.get()
        }
    }

    var isActive: Bool { channel.isActive }

    /// Messages received but not taken yet (for diagnostics).
    var buffered: [JSONValue] {
        get async { await inbox.buffered }
    }

    /// Sends a normal close frame and closes the connection.
    func close() async {
        if channel.isActive {
            var data = ByteBuffer()
            data.writeInteger(UInt16(1000))
            try? await sendFrame(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data))
        }
        try? await channel.close()
        await pump.value
    }
}
