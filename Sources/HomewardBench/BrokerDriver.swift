import NIOCore
import NIOPosix
import NIOSSL

/// One broker under test, as the scenarios see it. Each implementation speaks its broker's own
/// protocol (Homeward JSON over WSS, NATS text protocol over WSS, MQTT 3.1.1 over TLS) and maps
/// the same load shape onto it: a walker is a publisher, its observers are subscribers.
public protocol BrokerDriver: AnyObject, Sendable {
    var name: String { get }
    /// The broker's process, for its resident memory.
    var pid: Int32? { get }
    /// Every process that does the broker's work (a cluster's relays), for CPU per delivery.
    var cpuPIDs: [Int32] { get }
    /// Where that CPU goes, for the log: named groups of processes, the ones that help included
    /// (a cluster's bus and database); empty when there is only the broker.
    var cpuBreakdown: [(name: String, pids: [Int32])] { get }
    /// Walkers `0..<walkers`, each followed by `observers` subscribers whose deliveries go to `sink`.
    func makeFanout(walkers: Int, observers: Int, sink: DeliverySink) async throws -> FanoutRig
    /// Gets ready for `openIdle`/`connectAndAuthenticate` (e.g. makes an account and a token).
    func prepareConnections() async throws
    /// One connected, authenticated connection that then stays idle.
    func openIdle(source: String?) async throws -> BenchSocket
    /// An alarm owner with `recipients` online recipients.
    func makeAlarm(recipients: Int) async throws -> AlarmRig
}

extension BrokerDriver {
    public var cpuPIDs: [Int32] { pid.map { [$0] } ?? [] }
    public var cpuBreakdown: [(name: String, pids: [Int32])] { [] }
}

/// A walker: publishes one position when told to. `publish` runs on `eventLoop`.
public protocol Publisher: AnyObject, Sendable {
    var eventLoop: any EventLoop { get }
    func publish(sequence: Int)
}

public struct FanoutRig: Sendable {
    public var publishers: [any Publisher]
    public var sockets: [BenchSocket]

    public func close() {
        for socket in sockets { socket.close() }
    }
}

public protocol AlarmRig: Sendable {
    /// Raises one alarm; returns microseconds until every recipient had it (nil if some never did).
    func raise() async throws -> UInt64?
    func close() async
}

/// What every driver shares: the event loops, the TLS client context and the source addresses.
public struct BenchEnvironment: Sendable {
    public let group: MultiThreadedEventLoopGroup
    public let tls: NIOSSLContext
    /// Client source addresses, used round-robin so that 20k connections do not run out of ports.
    public let sources: [String]

    public init(threads: Int, sources: [String]) throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        var configuration = TLSConfiguration.makeClientConfiguration()
        // Loopback benchmark against throwaway certificates: the handshake cost is measured, trust is not.
        configuration.certificateVerification = .none
        tls = try NIOSSLContext(configuration: configuration)
        self.sources = sources
    }

    public func source(_ index: Int) -> String? {
        sources.isEmpty ? nil : sources[index % sources.count]
    }
}

/// Runs `body` for `0..<count` with at most `width` running at once.
public func forEachConcurrently(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(width, count) {
            let index = next
            group.addTask { try await body(index) }
            next += 1
        }
        while try await group.next() != nil {
            if next < count {
                let index = next
                group.addTask { try await body(index) }
                next += 1
            }
        }
    }
}

/// Collects results of `body` for `0..<count`, at most `width` at once, in index order.
public func mapConcurrently<T: Sendable>(_ count: Int, width: Int,
                                         _ body: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
    try await withThrowingTaskGroup(of: (Int, T).self) { group in
        var results = [T?](repeating: nil, count: count)
        var next = 0
        while next < min(width, count) {
            let index = next
            group.addTask { (index, try await body(index)) }
            next += 1
        }
        while let (index, value) = try await group.next() {
            results[index] = value
            if next < count {
                let index = next
                group.addTask { (index, try await body(index)) }
                next += 1
            }
        }
        return results.map { $0! }
    }
}
