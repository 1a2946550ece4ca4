import Foundation
import HomewardProtocol
import NIOCore
import NIOSSL
import Synchronization

/// One Homeward connection: requests of the wire model with ids for setup, and fast prefix checks
/// for the positions and alarms that arrive during a measurement.
final class HomewardLink: Sendable {
    let socket: BenchSocket
    private let inbox: Inbox
    private let ids = Atomic<Int>(0)

    /// What arrives on the socket, read on its event loop, where all that it keeps lives.
    final class Inbox: ByteReceiver {
        struct State {
            var pending: [Int64: CheckedContinuation<JSONValue, Never>] = [:]
            var onPosition: (@Sendable (ByteBuffer) -> Void)?
            var onAlarm: (@Sendable () -> Void)?
        }

        let state: NIOLoopBoundBox<State>

        init(eventLoop: any EventLoop) {
            state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
        }

        func received(_ buffer: ByteBuffer, on socket: BenchSocket) {
            if HomewardLink.hasPrefix(buffer, HomewardLink.posPrefix) {
                state.value.onPosition?(buffer)
                return
            }
            if HomewardLink.hasPrefix(buffer, HomewardLink.alarmPrefix) {
                state.value.onAlarm?()
                return
            }
            guard let reply = try? JSONParser.parse(buffer.readableBytesView), case .int(let re)? = reply["re"],
                  let waiter = state.value.pending.removeValue(forKey: re) else { return }
            waiter.resume(returning: reply)
        }

        func closed() {
            let waiters = state.value.pending
            state.value.pending = [:]
            for waiter in waiters.values { waiter.resume(returning: HomewardLink.failure("closed")) }
        }
    }

    static let posPrefix: [UInt8] = Array("{\"type\":\"pos\"".utf8)
    static let alarmPrefix: [UInt8] = Array("{\"type\":\"alarm\",".utf8)

    private init(socket: BenchSocket, inbox: Inbox) {
        self.socket = socket
        self.inbox = inbox
    }

    static func connect(_ env: BenchEnvironment, port: Int, source: String?) async throws -> HomewardLink {
        // The loop is chosen first: the inbox keeps its state there and exists before the socket does.
        let loop = env.group.next()
        let inbox = Inbox(eventLoop: loop)
        let socket = try await BenchSocket.connect(group: loop, tls: env.tls, host: "127.0.0.1", port: port, source: source,
                                                   framing: .webSocket(path: "/v1/ws", subprotocol: "homeward.v1"),
                                                   receiver: inbox)
        return HomewardLink(socket: socket, inbox: inbox)
    }

    /// Hands every position that arrives to `handler`, on the socket's event loop; from before the next request.
    func onPosition(_ handler: @escaping @Sendable (ByteBuffer) -> Void) {
        let state = inbox.state
        socket.eventLoop.execute { state.value.onPosition = handler }
    }

    /// Calls `handler` for every alarm that arrives, as `onPosition`.
    func onAlarm(_ handler: @escaping @Sendable () -> Void) {
        let state = inbox.state
        socket.eventLoop.execute { state.value.onAlarm = handler }
    }

    /// A reply the relay did not send: the request was not answered (`code` says why).
    static func failure(_ code: String) -> JSONValue {
        .object([("type", .string("error")), ("code", .string(code))])
    }

    static func hasPrefix(_ buffer: ByteBuffer, _ prefix: [UInt8]) -> Bool {
        guard buffer.readableBytes >= prefix.count else { return false }
        return buffer.withUnsafeReadableBytes { bytes in
            for index in 0..<prefix.count where bytes[index] != prefix[index] { return false }
            return true
        }
    }

    /// Sends `request` with a new id and waits for the `ok` reply.
    @discardableResult
    func request(_ request: Request) async throws -> JSONValue {
        let reply = await exchange(request)
        guard reply.string("type") == "ok" else {
            throw BenchError.failed("homeward: \(reply.string("code") ?? "?"): \(reply.string("message") ?? "")")
        }
        return reply
    }

    /// Sends `request` with a new id and returns its reply, `ok` or `error`; after `timeout` seconds without
    /// one, an error with code `timeout` (a reply that comes later is dropped).
    func exchange(_ request: Request, timeout: Double = 60) async -> JSONValue {
        let (socket, state, loop) = (socket, inbox.state, socket.eventLoop)
        let id = Int64(ids.wrappingAdd(1, ordering: .relaxed).newValue)
        let bytes = JSONWriter.encode(request.json(id: .int(id)))
        return await withCheckedContinuation { continuation in
            loop.execute {
                state.value.pending[id] = continuation
                socket.send(bytes)
                loop.scheduleTask(in: .milliseconds(Int64(timeout * 1000))) {
                    state.value.pending.removeValue(forKey: id)?.resume(returning: Self.failure("timeout"))
                }
            }
        }
    }

    /// Sends `request` and decodes its `ok` reply as `Body`.
    func request<Body: ReplyBody>(_ request: Request, as body: Body.Type) async throws -> Body {
        guard let reply = Body(json: try await self.request(request)) else {
            throw BenchError.failed("homeward: \(request.type) reply without its members")
        }
        return reply
    }
}

final class HomewardWalker: Publisher, Sendable {
    let link: HomewardLink
    let index: Int
    var eventLoop: any EventLoop { link.socket.eventLoop }

    init(link: HomewardLink, index: Int) {
        self.link = link
        self.index = index
    }

    func publish(sequence: Int) {
        let socket = link.socket
        socket.send(Payload.homewardPosition(walker: index, sequence: sequence, allocator: socket.channel.allocator))
    }
}

/// Homeward, started from the `homeward-relay` binary beside this tool with a temporary data directory:
/// one relay, or (`homeward-cluster`) several on one PostgreSQL and one NATS, each given its own arguments.
public final class HomewardDriver: BrokerDriver, Sendable {
    /// One relay process of the driver.
    struct Node {
        let port: Int
        let process: ManagedProcess
        let dataDir: String
    }

    public let name: String
    let env: BenchEnvironment
    let nodes: [Node]
    public var nodeCount: Int { nodes.count }
    /// The first relay: idle connections, storms and alarm owners go there.
    public var port: Int { nodes[0].port }
    public var pid: Int32? { nodes[0].process.pid }
    public var cpuPIDs: [Int32] { nodes.compactMap { $0.process.pid } }
    /// Processes that help a cluster (its bus and database), named, for the CPU breakdown.
    let helpers: [(name: String, pid: Int32)]
    public var cpuBreakdown: [(name: String, pids: [Int32])] {
        guard nodes.count > 1 else { return [] }
        let relays = nodes.enumerated().map { index, node in
            (name: index == 0 ? "relay n1 (walkers)" : "relay n\(index + 1)", pids: node.process.pid.map { [$0] } ?? [])
        }
        return relays + helpers.map { (name: $0.name, pids: SystemInfo.withChildren($0.pid)) }
    }
    private let counter = Mutex(0)
    /// The token idle connections sign in with (`prepareConnections`).
    private let idleToken = Mutex<String?>(nil)
    static let password = "bench-password-1"

    /// One relay on `port`.
    public convenience init(env: BenchEnvironment, binary: String, port: Int, extraArguments: [String]) throws {
        try self.init(name: "homeward", env: env, binary: binary, nodes: [(port, extraArguments)])
    }

    /// One relay per entry of `nodes`, each on its port with its own arguments added.
    public init(name: String, env: BenchEnvironment, binary: String, nodes: [(port: Int, arguments: [String])],
                helpers: [(name: String, pid: Int32)] = []) throws {
        self.name = name
        self.env = env
        self.helpers = helpers
        var started: [Node] = []
        do {
            for (index, node) in nodes.enumerated() {
                let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-bench-\(getpid())-\(name)-\(index)").path
                try? FileManager.default.removeItem(atPath: dataDir)
                try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
                // Limits raised so they do not distort the load: one account holds all idle/storm connections,
                // walkers publish far above the default per-connection rate, and alarms do not repeat mid-run.
                let arguments = [
                    "--host", "127.0.0.1", "--port", String(node.port), "--data-dir", dataDir,
                    "--pbkdf2-iterations", "210000", "--log-level", "info",
                    "--max-connections-per-user", "1000000", "--rate-limit", "1000000", "--max-backlog", "1000000",
                    "--alarm-repeat-interval", "3600", "--auth-timeout", "60", "--registrations-per-address", "0",
                    // Several relays on one host: each its own metrics port, not the default's one.
                    "--metrics-listen", "127.0.0.1:0",
                ] + node.arguments
                let process = try ManagedProcess.launch(binary, arguments, log: dataDir + "/relay.log")
                started.append(Node(port: node.port, process: process, dataDir: dataDir))
            }
        } catch {
            for node in started { node.process.terminate() }
            throw error
        }
        self.nodes = started
    }

    /// Waits for each relay's own "listening" line: a port that merely accepts connections may be
    /// another program's, and then the relay we started has failed to bind and exited.
    public func waitUntilReady() async throws {
        for node in nodes {
            let log = node.dataDir + "/relay.log"
            let deadline = BenchClock.seconds() + 60
            while true {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if text.contains("homeward relay listening") { break }
                if node.process.pid == nil {
                    throw BenchError.failed("homeward-relay exited before listening on 127.0.0.1:\(node.port):\n\(text)")
                }
                if BenchClock.seconds() > deadline {
                    throw BenchError.failed("homeward-relay is not listening on 127.0.0.1:\(node.port) after 60 s:\n\(text)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Stops every relay (SIGTERM, and waits for it to exit) and removes its data directory; with `logDirectory`,
    /// first keeps each relay's whole log there as NAME-N.log, its shutdown included.
    public func stop(keepingLogsIn logDirectory: String? = nil) {
        if let logDirectory { try? FileManager.default.createDirectory(atPath: logDirectory, withIntermediateDirectories: true) }
        for (index, node) in nodes.enumerated() {
            node.process.terminate()
            if let logDirectory { keepLog(of: node, as: "\(logDirectory)/\(name)-\(index).log") }
            try? FileManager.default.removeItem(atPath: node.dataDir)
        }
    }

    private func keepLog(of node: Node, as kept: String) {
        try? FileManager.default.removeItem(atPath: kept)
        do {
            try FileManager.default.copyItem(atPath: node.dataDir + "/relay.log", toPath: kept)
            log("\(name): relay log kept in \(kept)")
        } catch {
            log("\(name): cannot keep the relay log in \(kept): \(error)")
        }
    }

    private func nextName() -> String {
        let n = counter.withLock { value in
            value += 1
            return value
        }
        return "bench" + String(n)
    }

    /// A new account, signed in on a new connection to relay `node`.
    func registered(source: Int = 0, node: Int = 0) async throws -> (link: HomewardLink, username: String, token: String) {
        let link = try await HomewardLink.connect(env, port: nodes[node].port, source: env.source(source))
        let username = nextName()
        let reply = try await link.request(.register(username: username, password: Self.password, name: nil), as: SignInReply.self)
        guard let token = reply.token else { throw BenchError.failed("homeward: register gave no token") }
        return (link, username, token)
    }

    /// Makes `a` and `b` friends.
    func befriend(_ a: (link: HomewardLink, username: String), _ b: (link: HomewardLink, username: String)) async throws {
        try await a.link.request(.friendRequest(username: b.username))
        try await settled { try await b.link.request(.friendAccept(username: a.username)) }
    }

    /// Setup across relays: a request about what another relay stored a moment ago may find this relay
    /// not knowing it yet (not_found, forbidden); asked again for up to 5 s. The measurement is the hot
    /// path, not this (tests/cluster has the cross-relay timing as tests).
    @discardableResult
    func settled(_ request: () async throws -> JSONValue) async throws -> JSONValue {
        var attempts = nodes.count > 1 ? 50 : 1
        while true {
            do { return try await request() } catch let BenchError.failed(message) where message.contains("not_found") || message.contains("forbidden") {
                attempts -= 1
                if attempts == 0 { throw BenchError.failed(message) }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// The relay of a fan-out user: walkers on the first relay, their observers spread over the others
    /// (all on the one relay when there is one).
    func fanoutNode(user index: Int, observers: Int) -> Int {
        let position = index % (observers + 1)  // 0: the walker, 1...: its observers
        guard position > 0, nodes.count > 1 else { return 0 }
        return 1 + (index / (observers + 1) + position - 1) % (nodes.count - 1)
    }

    public func makeFanout(walkers: Int, observers: Int, sink: DeliverySink) async throws -> FanoutRig {
        let total = walkers * (observers + 1)
        let users = try await mapConcurrently(total, width: 16) { index in
            let user = try await self.registered(source: index, node: self.fanoutNode(user: index, observers: observers))
            return (link: user.link, username: user.username)
        }
        try await forEachConcurrently(walkers, width: 8) { w in
            let walker = users[w * (observers + 1)]
            let followers = (1...max(1, observers)).prefix(observers).map { users[w * (observers + 1) + $0] }
            for follower in followers { try await self.befriend(walker, follower) }
            let start = Request.sessionStart(SessionOptions(invite: followers.map(\.username)))
            guard let id = SessionReply(json: try await self.settled { try await walker.link.request(start) })?.session.id else {
                throw BenchError.failed("homeward: session.start reply without its session")
            }
            for follower in followers {
                follower.link.onPosition { sink.delivered($0) }
                try await self.settled { try await follower.link.request(.sessionAccept(sessionId: id)) }
            }
        }
        let publishers: [any Publisher] = (0..<walkers).map { HomewardWalker(link: users[$0 * (observers + 1)].link, index: $0) }
        return FanoutRig(publishers: publishers, sockets: users.map { $0.link.socket })
    }

    public func prepareConnections() async throws {
        guard idleToken.withLock({ $0 }) == nil else { return }
        let user = try await registered()
        idleToken.withLock { $0 = user.token }
        user.link.socket.close()
    }

    public func openIdle(source: String?) async throws -> BenchSocket {
        guard let token = idleToken.withLock({ $0 }) else { throw BenchError.failed("prepareConnections first") }
        let link = try await HomewardLink.connect(env, port: port, source: source)
        try await link.request(.hello(token: token))
        return link.socket
    }

    public func makeAlarm(recipients: Int) async throws -> any AlarmRig {
        let users = try await mapConcurrently(recipients + 1, width: 16) { index in
            let user = try await self.registered(source: index, node: index % self.nodes.count)
            return (link: user.link, username: user.username)
        }
        let owner = users[0]
        let counter = ArrivalCounter()
        try await forEachConcurrently(recipients, width: 8) { index in
            let recipient = users[index + 1]
            try await self.befriend(owner, recipient)
            recipient.link.onAlarm { counter.arrived() }
        }
        return HomewardAlarm(owner: owner.link, recipients: recipients, counter: counter,
                             sockets: users.map { $0.link.socket })
    }
}

struct HomewardAlarm: AlarmRig {
    let owner: HomewardLink
    let recipients: Int
    let counter: ArrivalCounter
    let sockets: [BenchSocket]

    func raise() async throws -> UInt64? {
        counter.arm(expected: recipients)
        let raise = Request.AlarmRaise(text: "benchmark alarm", lat: 57.7089, lon: 11.9746, acc: 8)
        let reply = try await owner.request(.alarmRaise(raise), as: AlarmRaiseReply.self)
        let latency = await counter.wait(timeout: 10)
        try await owner.request(.alarmCancel(alarmId: reply.alarm.id, reason: nil))
        return latency
    }

    func close() async {
        for socket in sockets { socket.close() }
    }
}
