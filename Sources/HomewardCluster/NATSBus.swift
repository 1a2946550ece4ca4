import HomewardCore
import HomewardNATS
import HomewardProtocol
import Logging
import NIOCore
import Synchronization

/// The relay's bus on nats-server (`--bus nats://...`): see `RelayBus` for what goes over it, and
/// `ClusterSubjects` for where.
///
/// One `NATSClient` (one TCP connection, on one of the relay's event loops) per relay, with `echo` off so
/// the relay never hears its own messages. Positions are published without waiting from the walker's event
/// loop (`publishDetached`: in order per thread, never suspending, one write for all published meanwhile),
/// and positions heard are handed to the `BusReceiver` on the client's loop as they are read (a handler
/// per walker subscription: no task between the socket and the observers' loops); everything else a relay
/// hears is handed over from one task per subscription, which keeps each subject's order. The task that sends
/// the outbox runs on the client's loop (`EventLoopTaskExecutor`): what it publishes is written from there, and
/// the PONG of a flush it waits for resumes it, with no wake-up of another thread. (The receiving tasks stay on
/// the global pool: a relay that falls behind on notices must not hold up the socket its positions come from.)
public final class NATSBus: RelayBus {
    private let client: NATSClient
    private let node: String
    private let logger: Logger
    /// Everything but positions, sent in order by one task (`send`): a relay's SUB for a walker must reach
    /// the server before the notice that makes the walker's relay start publishing to it, and an UNSUB
    /// must not overtake an earlier SUB of the same walker.
    private let outbox: AsyncStream<Outgoing>
    private let outboxInput: AsyncStream<Outgoing>.Continuation
    /// Relays whose presence snapshot to ask for (`requestPresenceSnapshot`): asked by their own task, each
    /// request as a child of it, so that waiting for an answer holds up neither the outbox nor other requests.
    private let snapshotRequests: AsyncStream<String>
    private let snapshotRequestInput: AsyncStream<String>.Continuation

    enum Outgoing {
        /// Resumed once the server has the subscriptions (a PING round trip after them).
        case interest(adding: Set<String>, removing: Set<String>, applied: CheckedContinuation<Void, Never>)
        case notice(ChangeNotice)
        case presence(PresenceMessage)
        /// Resumed once the server has everything sent before (a PING round trip).
        case flush(CheckedContinuation<Void, Never>)
    }
    /// The receiving tasks, and the one that sends the outbox.
    private let tasks = Mutex<(receiving: [Task<Void, Never>], sending: Task<Void, Never>?)>(([], nil))

    /// Change notices held for a relay that is behind; more are dropped, and the relay reloads (`start`).
    private let changeBufferLimit: Int
    /// The subscription to change notices once `start` made it, and how many of them went to the relay (`barrier`).
    private let changes = Mutex<NATSSubscription?>(nil)
    private let handoff = NoticeHandoff()

    private init(client: NATSClient, node: String, logger: Logger, changeBufferLimit: Int) {
        self.client = client
        self.node = node
        self.logger = logger
        self.changeBufferLimit = changeBufferLimit
        (outbox, outboxInput) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (snapshotRequests, snapshotRequestInput) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    /// Connects to the first server that answers (then fails over through `servers` in turn), on one loop of
    /// `eventLoopGroup`. A relay gives its own, so that positions heard go from the socket to the observers'
    /// loops with no thread between (that loop's fan-out batches them, as it does for positions of its own walkers).
    /// `changeBufferLimit`: see `changeBufferLimit` (tests make it small).
    public static func connect(servers: [NATSServerAddress], node: String, logger: Logger,
                               eventLoopGroup: any EventLoopGroup = NATSClient.defaultEventLoopGroup,
                               changeBufferLimit: Int = 65_536) async throws -> NATSBus {
        var configuration = NATSClientConfiguration(name: "homeward-relay \(node)")
        configuration.echo = false
        // A relay must not stop for a NATS outage: it keeps serving its own connections and retries.
        configuration.maxReconnectAttempts = nil
        // Positions resume within about a second of the server coming back.
        configuration.reconnect = NATSReconnectBackoff(firstDelay: .milliseconds(50), maximumDelay: .seconds(1))
        let urls = servers.map(\.url)
        let client = try await NATSClient.connect(urls: urls, configuration: configuration, eventLoopGroup: eventLoopGroup,
                                                  logger: logger)
        return NATSBus(client: client, node: node, logger: logger, changeBufferLimit: changeBufferLimit)
    }

    public var isShared: Bool { true }

    public func start(delivering receiver: any BusReceiver) async throws {
        let changes = try await client.subscribe(subject: ClusterSubjects.changes, bufferLimit: changeBufferLimit, overflow: .dropNewest)
        let presence = try await client.subscribe(subject: ClusterSubjects.presence)
        let snapshotAsked = try await client.subscribe(subject: ClusterSubjects.presenceSync(of: node))
        let lastPositions = try await client.subscribe(subject: ClusterSubjects.lastPositions)
        let client = self.client
        try await client.flush()
        let logger = self.logger
        let events = client.events
        let handoff = self.handoff
        let started = [
            Task {
                var dropped = 0
                defer { handoff.end() }
                for await message in changes {
                    do { receiver.remoteChanges(try ClusterCodec.decodeNotice(message.payload)) } catch {
                        // Its changes are unknown: the relay reloads its cache instead.
                        logger.error("could not read a change notice", metadata: ["error": "\(error)"])
                        receiver.remoteChanges(.unreadable)
                    }
                    // A full buffer dropped notices (a drop happens only while the buffer is full, so the
                    // count is seen once the buffered ones are read): what they said is unknown, so the relay
                    // reloads, as for an unreadable notice; the reload also closes connections whose token
                    // they revoked.
                    if changes.droppedMessages != dropped {
                        logger.warning("change notices were dropped (this relay fell behind); reloading",
                                       metadata: ["dropped": "\(changes.droppedMessages - dropped)"])
                        dropped = changes.droppedMessages
                        receiver.remoteChanges(.unreadable)
                    }
                    handoff.handedOne()
                }
            },
            Task {
                for await message in presence {
                    do {
                        let decoded = try ClusterCodec.decodePresence(message.payload)
                        // Snapshots come only as answers to this relay's own requests.
                        if case .snapshot = decoded { continue }
                        receiver.remotePresence(decoded)
                    } catch {
                        logger.error("ignored a presence message", metadata: ["error": "\(error)"])
                    }
                }
            },
            Task {
                for await message in snapshotAsked {
                    guard let replyTo = message.replyTo else { continue }
                    let snapshot = await receiver.localPresenceSnapshot()
                    client.publishDetached(subject: replyTo, payload: ClusterCodec.encode(.snapshot(snapshot)))
                }
            },
            Task { await self.askForSnapshots(delivering: receiver) },
            Task {
                for await message in lastPositions {
                    guard let replyTo = message.replyTo else { continue }
                    let askers: [String]
                    do { askers = try ClusterCodec.decodeLastPositionRequest(message.payload) } catch {
                        logger.error("ignored a last-position request", metadata: ["error": "\(error)"])
                        continue
                    }
                    guard let answer = receiver.localLastPosition(of: ClusterSubjects.walker(in: message.subject), for: askers) else { continue }
                    client.publishDetached(subject: replyTo, payload: ClusterCodec.encode(answer))
                }
            },
            Task {
                for await event in events {
                    switch event {
                    case .disconnected:
                        logger.warning("lost the bus; positions from other relays pause until it is back")
                        receiver.busDisconnected()
                    case .reconnected:
                        // Notices sent while this relay was away are lost: PostgreSQL has what they said.
                        logger.notice("bus is back; refreshing from the store")
                        receiver.busReconnected()
                    default:
                        break
                    }
                }
            },
        ]
        let sending = Task(executorPreference: EventLoopTaskExecutor(client.eventLoop)) { await self.send(delivering: receiver) }
        tasks.withLock { $0 = (started, sending) }
        self.changes.withLock { $0 = changes }
    }

    public func publishPosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {
        client.publishDetached(subject: ClusterSubjects.positions(of: walker), payload: ClusterCodec.encode(message, restriction: restriction))
    }

    public func updateInterest(adding: Set<String>, removing: Set<String>) async {
        await withCheckedContinuation { applied in
            if case .terminated = outboxInput.yield(.interest(adding: adding, removing: removing, applied: applied)) {
                applied.resume()
            }
        }
    }

    public func lastPosition(of walker: String, for askers: [String]) async -> LastPositionAnswer? {
        guard let reply = try? await client.request(subject: ClusterSubjects.lastPosition(of: walker),
                                                    payload: ClusterCodec.encodeLastPositionRequest(for: askers),
                                                    timeout: .milliseconds(250)) else { return nil }
        do { return try ClusterCodec.decodeLastPositionAnswer(reply.payload) } catch {
            logger.error("ignored a last-position answer", metadata: ["error": "\(error)"])
            return nil
        }
    }

    public func publishChanges(_ notice: ChangeNotice) {
        outboxInput.yield(.notice(notice))
    }

    public func publishPresence(_ message: PresenceMessage) {
        outboxInput.yield(.presence(message))
    }

    public func requestPresenceSnapshot(of node: String) {
        snapshotRequestInput.yield(node)
    }

    /// Asks each relay named in `snapshotRequests` for its snapshot and hands the answer to `receiver`.
    private func askForSnapshots(delivering receiver: any BusReceiver) async {
        let client = self.client
        let logger = self.logger
        await withDiscardingTaskGroup { group in
            for await node in snapshotRequests {
                group.addTask {
                    guard let reply = try? await client.request(subject: ClusterSubjects.presenceSync(of: node), payload: ByteBuffer(),
                                                                timeout: Self.snapshotTimeout) else { return }
                    do {
                        guard case .snapshot(let snapshot) = try ClusterCodec.decodePresence(reply.payload), snapshot.node == node else {
                            throw ClusterCodec.DecodingError.malformed("an answer to a snapshot request that is not \(node)'s snapshot")
                        }
                        receiver.remotePresence(.snapshot(snapshot))
                    } catch {
                        logger.error("ignored a presence snapshot", metadata: ["node": "\(node)", "error": "\(error)"])
                    }
                }
            }
        }
    }

    /// How long a snapshot request waits for its answer (the receiver asks again a second after asking).
    static let snapshotTimeout: Duration = .milliseconds(900)

    public func flush() async {
        await withCheckedContinuation { flushed in
            if case .terminated = outboxInput.yield(.flush(flushed)) { flushed.resume() }
        }
    }

    /// One PING round trip on this relay's own connection (not through the outbox: it orders nothing this
    /// relay sends), then a wait until the notice subscription has handed over every message it took before
    /// the PONG. nats-server writes to a connection in the order it processes what it sends there: a notice
    /// another relay had confirmed (its PUB, then its PING answered) was queued for this connection before
    /// this PING was read, so it comes before the PONG. Within one nats-server; through a cluster of them,
    /// routes forward a notice asynchronously and a barrier on another server may pass it.
    public func barrier() async -> Int? {
        guard let changes = self.changes.withLock({ $0 }) else { return nil }
        do { try await client.flush(timeout: Self.barrierTimeout) } catch { return nil }
        let generation = client.reconnects
        guard await handoff.wait(until: changes.receivedMessages) else { return nil }
        return generation
    }

    /// Longer than this and the relay asks PostgreSQL instead (a round trip there is a millisecond or two).
    static let barrierTimeout = Duration.milliseconds(250)

    public var generation: Int? { self.changes.withLock { $0 } == nil ? nil : client.reconnects }

    /// Sends what is in the outbox (the relay's last presence delta), then closes the connection.
    public func stop() async {
        outboxInput.finish()
        snapshotRequestInput.finish()
        let (receiving, sending) = tasks.withLock { $0 }
        await sending?.value
        await client.close()
        for task in receiving { task.cancel() }
    }

    /// Sends the outbox in order; subscribes to the walkers this relay's connections receive, one
    /// subscription each, whose positions go to `receiver` on the client's loop.
    private func send(delivering receiver: any BusReceiver) async {
        var subscriptions: [String: NATSHandlerSubscription] = [:]
        for await outgoing in outbox {
            let change: (adding: Set<String>, removing: Set<String>)
            let applied: CheckedContinuation<Void, Never>
            switch outgoing {
            case .notice(let notice):
                client.publishDetached(subject: ClusterSubjects.changes, payload: ClusterCodec.encode(notice))
                continue
            case .presence(let message):
                client.publishDetached(subject: ClusterSubjects.presence, payload: ClusterCodec.encode(message))
                continue
            case .flush(let flushed):
                try? await client.flush(timeout: .seconds(1))
                flushed.resume()
                continue
            case .interest(let adding, let removing, let continuation):
                change = (adding, removing)
                applied = continuation
            }
            for walker in change.removing {
                await subscriptions.removeValue(forKey: walker)?.unsubscribe()
            }
            for walker in change.adding where subscriptions[walker] == nil {
                do {
                    // On the client's loop, as each is read: the observers' connections hold what they cannot
                    // take yet (a slow one keeps the newest positions), so nothing is buffered here.
                    let logger = self.logger
                    subscriptions[walker] = try await client.subscribe(subject: ClusterSubjects.positions(of: walker)) { message in
                        do {
                            let (restriction, text) = try ClusterCodec.decodePosition(message.payload)
                            receiver.remotePosition(EncodedMessage(jsonText: text, type: "pos", positionFrom: walker), of: walker,
                                                    restriction: restriction)
                        } catch {
                            logger.error("ignored a position", metadata: ["walker": "\(walker)", "error": "\(error)"])
                        }
                    }
                } catch {
                    logger.error("could not subscribe to a walker's positions", metadata: ["walker": "\(walker)", "error": "\(error)"])
                }
            }
            // While disconnected this fails at once: the subscriptions are sent on reconnecting.
            if !change.adding.isEmpty { try? await client.flush(timeout: .seconds(1)) }
            applied.resume()
        }
        for subscription in subscriptions.values { await subscription.unsubscribe() }
    }
}

extension NATSServerAddress {
    /// The URL with its password, for the client (never logged).
    var url: String {
        let credentials = user.map { "\($0):\(password ?? "")@" } ?? ""
        return "nats://\(credentials)\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// Runs a task's jobs on one event loop (`Task(executorPreference:)`), each as one `execute`: a job enqueued from
/// the loop itself (a continuation resumed by what the loop read) runs in the same turn of the loop, without a
/// wake-up. For tasks that only hand messages on and wait for the loop's own I/O: the loop's connections wait
/// while they run.
final class EventLoopTaskExecutor: TaskExecutor {
    private let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
