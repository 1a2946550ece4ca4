import HomewardProtocol
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// A connection to a Homeward relay that survives losing it.
///
/// Requests are `async` calls that return the reply or throw `RelayClientError` (a relay
/// `error` reply becomes `.rejected` with its code). Everything else the relay sends arrives
/// through `events()`. When the connection drops, the client reconnects with backoff, signs in
/// again with the last token, and sends the newest position that could not go out meanwhile;
/// callers that keep calling `send(_:)` (a walk) simply carry on.
public actor RelayClient {
    public nonisolated let configuration: RelayClientConfiguration
    private let group: any EventLoopGroup
    private let tls: NIOSSLContext?
    private let logger: Logger
    private let broadcaster = EventBroadcaster()

    private enum Phase: Equatable {
        case idle, ready, reconnecting, closed
    }

    private struct PendingRequest {
        let type: String
        let continuation: CheckedContinuation<JSONValue, any Error>
    }

    private var phase = Phase.idle
    private var socket: WebSocketChannel?
    /// Bumped for each connection so that a late message from a dead one is ignored.
    private var generation = 0
    private var pending: [Int64: PendingRequest] = [:]
    private var nextRequestID: Int64 = 1
    private var readyWaiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    private var nextWaiterID = 0
    private var reconnectTask: Task<Void, Never>?
    private var unsentPosition: Position?

    /// The token used to sign in again after a reconnect.
    public private(set) var token: String?
    /// Who we are signed in as.
    public private(set) var user: User?
    /// Successful reconnects since `connect()`.
    public private(set) var reconnectCount = 0

    /// Throws `RelayClientError.tlsSetup` when the trust settings cannot be used (e.g. no CA file).
    public init(configuration: RelayClientConfiguration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                logger: Logger = Logger(label: "homeward.client")) throws(RelayClientError) {
        self.configuration = configuration
        self.group = eventLoopGroup
        self.logger = logger
        if configuration.endpoint.usesTLS {
            do { tls = try configuration.trust.makeContext() } catch { throw .tlsSetup(error.description) }
        } else {
            tls = nil
        }
    }

    // MARK: Connection

    /// Opens the first connection. Fails at once if the relay cannot be reached; only a
    /// connection that was up is reconnected automatically.
    public func connect() async throws(RelayClientError) {
        switch phase {
        case .idle: break
        case .closed: throw .closed
        case .ready, .reconnecting: return
        }
        try await openSocket()
        phase = .ready
    }

    /// Closes the connection for good: pending requests fail with `.closed` and event streams end.
    public func close() async {
        guard phase != .closed else { return }
        phase = .closed
        reconnectTask?.cancel()
        reconnectTask = nil
        let socket = self.socket
        self.socket = nil
        failPending(.closed)
        failWaiters(.closed)
        if let socket {
            socket.close()
            // Wait for the closing handshake so that the relay sees a clean 1000.
            try? await socket.channel.closeFuture.get()
        }
        broadcaster.finish()
    }

    /// A new stream of everything that happens from now on. Subscribe before sending the
    /// request whose consequences you want to see.
    public nonisolated func events() -> AsyncStream<RelayEvent> {
        broadcaster.subscribe()
    }

    public var isConnected: Bool { phase == .ready && socket != nil }

    private func openSocket() async throws(RelayClientError) {
        let options = WebSocketChannel.Options(
            connectTimeout: .nanoseconds(Int64(configuration.connectTimeout.seconds * 1e9)),
            maxMessageBytes: configuration.maxMessageBytes,
            silenceLimit: .nanoseconds(Int64(configuration.silenceLimit.seconds * 1e9)))
        let socket = try await WebSocketChannel.connect(to: configuration.endpoint, tls: tls, group: group, options: options)
        guard phase != .closed else {
            socket.close()
            throw .closed
        }
        generation += 1
        let current = generation
        self.socket = socket
        Task { await self.read(socket, generation: current) }
    }

    private func read(_ socket: WebSocketChannel, generation: Int) async {
        for await event in socket.events {
            switch event {
            case .text(let buffer):
                let receivedAt = ContinuousClock.now
                guard let value = try? JSONParser.parse(buffer.readableBytesView), case .object = value else {
                    logger.warning("ignoring a message that is not a JSON object")
                    continue
                }
                receive(value, receivedAt: receivedAt, generation: generation)
            case .closed(let closure):
                connectionEnded(closure, generation: generation)
            }
        }
    }

    private func receive(_ message: JSONValue, receivedAt: ContinuousClock.Instant, generation: Int) {
        guard generation == self.generation else { return }
        if let re = message["re"], re != .null {
            guard case .int(let id) = re, let request = pending.removeValue(forKey: id) else {
                logger.debug("reply to an unknown request", metadata: ["re": "\(re)"])
                return
            }
            if message.string("type") == "error" {
                request.continuation.resume(throwing: RelayClientError.rejected(ProtocolError.fromReply(message)))
            } else {
                request.continuation.resume(returning: message)
            }
            return
        }
        broadcaster.publish(RelayEvent(json: message, receivedAt: receivedAt))
    }

    private func connectionEnded(_ closure: SocketClosure, generation: Int) {
        guard generation == self.generation, socket != nil else { return }
        socket = nil
        failPending(.connectionLost(closure))
        guard phase != .closed else { return }
        logger.info("connection lost", metadata: ["reason": "\(closure)"])
        broadcaster.publish(.connection(.disconnected(closure)))
        guard configuration.reconnect.isEnabled else {
            phase = .idle
            failWaiters(.connectionLost(closure))
            return
        }
        phase = .reconnecting
        reconnectTask = Task { await self.reconnect() }
    }

    private func reconnect() async {
        let policy = configuration.reconnect
        var attempt = 0
        while phase == .reconnecting, !Task.isCancelled {
            if let maximum = policy.maximumAttempts, attempt >= maximum {
                phase = .idle
                failWaiters(.notConnected)
                broadcaster.publish(.connection(.gaveUp))
                return
            }
            let delay = policy.delay(forAttempt: attempt)
            attempt += 1
            broadcaster.publish(.connection(.reconnecting(attempt: attempt, delay: delay)))
            try? await Task.sleep(for: delay)
            guard phase == .reconnecting, !Task.isCancelled else { return }
            do {
                try await openSocket()
            } catch {
                logger.debug("reconnect failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                continue
            }
            if let token {
                do {
                    let reply = try await send("hello", [("token", .string(token))], waitForReady: false)
                    user = User(json: reply.object("user")) ?? user
                } catch .rejected(let error) where error.code == .unauthenticated {
                    self.token = nil
                    user = nil
                    finishReconnect(.signedOut(error.message))
                    return
                } catch {
                    logger.debug("sign-in after reconnect failed", metadata: ["error": "\(error)"])
                    // The new connection broke during sign-in: `connectionEnded` has started a new round.
                    guard let socket else { return }
                    // Otherwise (no reply in time) drop this connection, ignoring its end, and try again.
                    self.socket = nil
                    generation += 1
                    socket.close()
                    continue
                }
            }
            finishReconnect(.reconnected)
            return
        }
    }

    private func finishReconnect(_ change: RelayEvent.ConnectionChange) {
        guard phase == .reconnecting else { return }
        phase = .ready
        reconnectCount += 1
        reconnectTask = nil
        broadcaster.publish(.connection(change))
        let waiters = readyWaiters
        readyWaiters.removeAll()
        for waiter in waiters.values { waiter.resume() }
        if let position = unsentPosition, token != nil {
            unsentPosition = nil
            socket?.sendWithoutWaiting(JSONWriter.encode(Self.positionMessage(position, id: nil)))
        }
    }

    private func waitUntilReady() async throws(RelayClientError) {
        switch phase {
        case .ready where socket != nil: return
        case .idle: throw .notConnected
        case .closed: throw .closed
        case .ready, .reconnecting: break
        }
        let id = nextWaiterID
        nextWaiterID += 1
        let timeout = configuration.requestTimeout
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.expireWaiter(id)
        }
        defer { timer.cancel() }
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                readyWaiters[id] = continuation
            }
        } catch let error as RelayClientError {
            throw error
        } catch {
            throw .notConnected
        }
    }

    private func expireWaiter(_ id: Int) {
        readyWaiters.removeValue(forKey: id)?.resume(throwing: RelayClientError.timedOut("the relay to come back"))
    }

    private func failPending(_ error: RelayClientError) {
        let requests = pending
        pending.removeAll()
        for request in requests.values { request.continuation.resume(throwing: error) }
    }

    private func failWaiters(_ error: RelayClientError) {
        let waiters = readyWaiters
        readyWaiters.removeAll()
        for waiter in waiters.values { waiter.resume(throwing: error) }
    }

    // MARK: Requests

    /// Sends any request and returns the `ok` reply as JSON; the typed calls are built on this.
    /// Waits for a reconnect in progress (up to the request timeout).
    @discardableResult
    public func request(_ type: String, _ fields: [(String, JSONValue)] = []) async throws(RelayClientError) -> JSONValue {
        try await send(type, fields, waitForReady: true)
    }

    /// Sends a request of the wire model and returns the `ok` reply as JSON.
    @discardableResult
    public func request(_ request: Request) async throws(RelayClientError) -> JSONValue {
        try await send(request.type, request.fields, waitForReady: true)
    }

    /// Sends a request and decodes its `ok` reply as `Body`.
    func request<Body: ReplyBody>(_ request: Request, as body: Body.Type) async throws(RelayClientError) -> Body {
        let reply = try await self.request(request)
        guard let decoded = Body(json: reply) else { throw .unexpectedReply("\(request.type) reply without its members") }
        return decoded
    }

    private func send(_ type: String, _ fields: [(String, JSONValue)], waitForReady: Bool) async throws(RelayClientError) -> JSONValue {
        if waitForReady { try await waitUntilReady() }
        guard let socket else { throw phase == .closed ? .closed : .notConnected }
        let id = nextRequestID
        nextRequestID += 1
        let message = JSONValue.object([("type", .string(type)), ("id", .int(id))] + fields)
        let timeout = configuration.requestTimeout
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.expireRequest(id)
        }
        defer { timer.cancel() }
        let reply: JSONValue
        do {
            reply = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
                pending[id] = PendingRequest(type: type, continuation: continuation)
                socket.sendWithoutWaiting(JSONWriter.encode(message))
            }
        } catch let error as RelayClientError {
            throw error
        } catch {
            throw .unexpectedReply("\(error)")
        }
        try track(type, reply: reply)
        return reply
    }

    private func expireRequest(_ id: Int64) {
        guard let request = pending.removeValue(forKey: id) else { return }
        request.continuation.resume(throwing: RelayClientError.timedOut("the reply to \(request.type)"))
    }

    /// Remembers who we are after the requests that change it.
    private func track(_ type: String, reply: JSONValue) throws(RelayClientError) {
        switch type {
        case "register", "login":
            guard let signIn = SignInReply(json: reply), let token = signIn.token else {
                throw .unexpectedReply("\(type) reply without a user and a token")
            }
            self.token = token
            user = signIn.user
        case "hello":
            user = SignInReply(json: reply)?.user
        case "logout":
            token = nil
            user = nil
        default:
            break
        }
    }

    /// Sets the token to sign in with after a reconnect without sending `hello` (e.g. restored
    /// from disk before `connect()`; `hello(token:)` sets it as well).
    public func useToken(_ token: String?) {
        self.token = token
    }

    // MARK: Positions

    /// Sends a position without waiting for anything: the relay answers a `pos` only when it
    /// rejects it, as a `.requestFailed` event. While reconnecting the newest one is kept.
    @discardableResult
    public func send(_ position: Position) -> PositionDelivery {
        guard phase == .ready, let socket else {
            unsentPosition = position
            return .deferred
        }
        socket.sendWithoutWaiting(JSONWriter.encode(Self.positionMessage(position, id: nil)))
        return .sent
    }

    /// Sends a position and waits for the relay's `ok`.
    public func sendAcknowledged(_ position: Position) async throws(RelayClientError) {
        try await request(.position(position))
    }

    static func positionMessage(_ position: Position, id: Int64?) -> JSONValue {
        Request.position(position).json(id: id.map(RequestID.int))
    }
}
