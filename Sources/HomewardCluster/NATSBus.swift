import Dispatch
import HomewardCore
import HomewardNATS
import HomewardProtocol
import Logging
import Metrics
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
        /// Notice subjects to subscribe to and drop (`follow`); resumed once the server has the subscriptions.
        case follow(adding: Set<String>, removing: Set<String>, applied: CheckedContinuation<Void, Never>)
    }
    /// The receiving tasks, and the one that sends the outbox.
    private let tasks = Mutex<(receiving: [Task<Void, Never>], sending: Task<Void, Never>?)>(([], nil))

    /// Change notices held for a relay that is behind; more are dropped, and the relay reloads (`start`).
    private let changeBufferLimit: Int
    /// Whether `start` subscribed, and its subscription to every change notice (`hw.changes`), whose count of messages
    /// the barrier waits for; none for a bus that hears only the subjects it follows (`readsEveryNotice` false).
    private let changes = Mutex<(started: Bool, subscription: NATSSubscription?)>((false, nil))
    /// Whether the relay hears every notice (`hw.changes`), or only those of the users and timer shards it follows.
    public let readsEveryNotice: Bool
    /// Whether this relay's notices also go to the subjects of the users and timer shards they concern (`publish`).
    public let publishesPerUser: Bool
    private let handoff = NoticeHandoff()

    /// This relay's epoch on the bus (new at each start) and the stamps of the notices it sends on users' and timer
    /// shards' subjects (`NoticeStamp`), numbered by the sending task.
    private let epoch = String(UInt64.random(in: 1...UInt64.max), radix: 36)
    /// Notices heard on the followed subjects (`follow`), in the order the client read them, whatever the subject:
    /// their handlers (on the client's loop) count them and put them here; one task reads them.
    private let followedNotices: AsyncStream<ByteBuffer>
    private let followedInput: AsyncStream<ByteBuffer>.Continuation
    /// How many messages the followed subjects took (read by `barrier` after its PONG), and how many of them the
    /// full buffer dropped.
    private let followedCounts = Mutex<(received: Int, dropped: Int)>((0, 0))
    private let followedHandoff = NoticeHandoff()
    private let noticesReceived: Counter
    private let noticeCopiesDropped: Counter
    private let noticeMessagesPublished: Counter
    private let followedSubjects: Gauge
    /// Checks that the other relays publish their notices as this one does (`--change-notices`).
    private let noticeModes: NoticeModeCheck

    private init(client: NATSClient, node: String, logger: Logger, changeBufferLimit: Int, publishesPerUser: Bool,
                 readsEveryNotice: Bool, metrics: any MetricsFactory) {
        self.client = client
        self.publishesPerUser = publishesPerUser
        self.readsEveryNotice = readsEveryNotice
        self.node = node
        self.logger = logger
        self.changeBufferLimit = changeBufferLimit
        (outbox, outboxInput) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (snapshotRequests, snapshotRequestInput) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (followedNotices, followedInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(changeBufferLimit))
        noticesReceived = Counter(label: "homeward_bus_notices_received_total", factory: metrics)
        noticeCopiesDropped = Counter(label: "homeward_bus_notice_copies_dropped_total", factory: metrics)
        noticeMessagesPublished = Counter(label: "homeward_bus_notice_messages_published_total", factory: metrics)
        followedSubjects = Gauge(label: "homeward_bus_followed_subjects", factory: metrics)
        noticeModes = NoticeModeCheck(publishesPerUser: publishesPerUser, readsEveryNotice: readsEveryNotice, logger: logger,
                                      metrics: metrics)
    }

    /// Connects to the first server that answers (then fails over through `servers` in turn), on one loop of
    /// `eventLoopGroup`. A relay gives its own, so that positions heard go from the socket to the observers'
    /// loops with no thread between (that loop's fan-out batches them, as it does for positions of its own walkers).
    /// `changeBufferLimit`: see `changeBufferLimit` (tests make it small). `publishesPerUser`: notices also go to each
    /// user's and timer shard's subject (`--change-notices per-user`, on every relay of the cluster); `readsEveryNotice`
    /// false: the relay hears only the subjects it follows (a cache of connected users, with notices per user).
    public static func connect(servers: [NATSServerAddress], node: String, logger: Logger,
                               eventLoopGroup: any EventLoopGroup = NATSClient.defaultEventLoopGroup,
                               changeBufferLimit: Int = 65_536, publishesPerUser: Bool = true, readsEveryNotice: Bool = true,
                               metrics: any MetricsFactory = MetricsSystem.factory) async throws -> NATSBus {
        // A relay hearing only what it follows needs every relay to publish per user (`--change-notices`).
        precondition(readsEveryNotice || publishesPerUser, "a bus that reads only followed subjects publishes on them too")
        var configuration = NATSClientConfiguration(name: "homeward-relay \(node)")
        configuration.echo = false
        // A relay must not stop for a NATS outage: it keeps serving its own connections and retries.
        configuration.maxReconnectAttempts = nil
        // Positions resume within about a second of the server coming back.
        configuration.reconnect = NATSReconnectBackoff(firstDelay: .milliseconds(50), maximumDelay: .seconds(1))
        let urls = servers.map(\.url)
        let client = try await NATSClient.connect(urls: urls, configuration: configuration, eventLoopGroup: eventLoopGroup,
                                                  logger: logger)
        return NATSBus(client: client, node: node, logger: logger, changeBufferLimit: changeBufferLimit,
                       publishesPerUser: publishesPerUser, readsEveryNotice: readsEveryNotice, metrics: metrics)
    }

    public var isShared: Bool { true }

    public func start(delivering receiver: any BusReceiver) async throws {
        let changes = readsEveryNotice
            ? try await client.subscribe(subject: ClusterSubjects.changes, bufferLimit: changeBufferLimit, overflow: .dropNewest) : nil
        let presence = try await client.subscribe(subject: ClusterSubjects.presence)
        let snapshotAsked = try await client.subscribe(subject: ClusterSubjects.presenceSync(of: node))
        let lastPositions = try await client.subscribe(subject: ClusterSubjects.lastPositions)
        let client = self.client
        try await client.flush()
        let logger = self.logger
        let events = client.events
        let handoff = self.handoff
        let noticesReceived = self.noticesReceived
        let noticeModes = self.noticeModes
        let started = [
            Task {
                var dropped = 0
                defer { handoff.end() }
                guard let changes else { return }
                for await message in changes {
                    noticesReceived.increment()
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
            Task { await self.readFollowedNotices(delivering: receiver) },
            Task {
                for await message in presence {
                    do {
                        let decoded = try ClusterCodec.decodePresence(message.payload)
                        // Snapshots come only as answers to this relay's own requests.
                        if case .snapshot = decoded { continue }
                        if case .heartbeat(let heartbeat) = decoded, noticeModes.heard(heartbeat, now: Self.uptimeMillis()) {
                            await self.readNotices(ofUnstampedPublisher: heartbeat.node, delivering: receiver)
                        }
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
        self.changes.withLock { $0 = (true, changes) }
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

    /// Subscribes to the notices about `users` and drops those about `unfollowing` (`hw.changes.USER`), for a relay
    /// caching only the users it follows; returns once nats-server has the subscriptions (a PING round trip after
    /// them), so that every notice published after this returns reaches this relay (or once that cannot be confirmed
    /// now: a reconnect subscribes again, and the relay reloads for it). Notices that come on several of the
    /// followed subjects are handed over once (`NoticeDuplicates`).
    public func follow(users: Set<String>, unfollowing: Set<String>) async {
        await changeFollowed(adding: Set(users.map(ClusterSubjects.changes(of:))),
                             removing: Set(unfollowing.subtracting(users).map(ClusterSubjects.changes(of:))))
    }

    /// Subscribes to the notices that write deadlines of the users in `taking`'s timer shards
    /// (`hw.changes.timers.SHARD`) and drops those of `releasing`, as `follow(users:unfollowing:)` does.
    public func followTimerShards(taking: TimerShards, releasing: TimerShards) async {
        await changeFollowed(adding: Set(taking.members.map(ClusterSubjects.timerChanges(of:))),
                             removing: Set(releasing.subtracting(taking).members.map(ClusterSubjects.timerChanges(of:))))
    }

    private func changeFollowed(adding: Set<String>, removing: Set<String>) async {
        guard !adding.isEmpty || !removing.isEmpty else { return }
        await withCheckedContinuation { applied in
            if case .terminated = outboxInput.yield(.follow(adding: adding, removing: removing, applied: applied)) {
                applied.resume()
            }
        }
    }

    /// A bus reading only followed subjects heard `node` publish on `hw.changes` alone (`NoticeModeCheck`): it reads
    /// `hw.changes` from now on (taking that relay's notices there), and once nats-server has the subscription tells the
    /// relay to read back what that relay committed before, whose notices went to nobody here.
    private func readNotices(ofUnstampedPublisher node: String, delivering receiver: any BusReceiver) async {
        await changeFollowed(adding: [ClusterSubjects.changes], removing: [])
        receiver.missedNotices(of: node)
    }

    /// Hands the notices of the followed subjects to `receiver` in the order they came, each once: a copy (a
    /// number its relay already sent in this epoch) is dropped before it is decoded, and counted as handed over
    /// for the barrier. A notice without a stamp came on `hw.changes` (read while a relay publishes there alone,
    /// `NoticeModeCheck`): taken only from such a relay; a relay publishing per user sends there a copy of what it
    /// stamps, dropped here, and so is the stamped copy of the last one taken from a relay that turns out to stamp
    /// (it restarted per user before its heartbeat said so).
    private func readFollowedNotices(delivering receiver: any BusReceiver) async {
        var duplicates = NoticeDuplicates()
        var lastUnstamped: [String: ByteBuffer] = [:]
        var dropped = 0
        defer { followedHandoff.end() }
        for await payload in followedNotices {
            noticesReceived.increment()
            do {
                if let (stamp, notice) = try NoticeStamp.split(payload) {
                    noticeModes.heardStamped(from: stamp.node)
                    if duplicates.take(stamp), lastUnstamped.removeValue(forKey: stamp.node) != notice {
                        receiver.remoteChanges(try ClusterCodec.decodeNotice(notice))
                    } else {
                        noticeCopiesDropped.increment()
                    }
                } else {
                    let notice = try ClusterCodec.decodeNotice(payload)
                    if noticeModes.takesUnstamped(from: notice.node) {
                        lastUnstamped[notice.node] = payload
                        receiver.remoteChanges(notice)
                    } else {
                        noticeCopiesDropped.increment()
                    }
                }
            } catch {
                logger.error("could not read a change notice", metadata: ["error": "\(error)"])
                receiver.remoteChanges(.unreadable)
            }
            // As for `hw.changes`: notices the full buffer dropped are unknown, so the relay reloads.
            let drops = followedCounts.withLock { $0.dropped }
            if drops != dropped {
                logger.warning("change notices were dropped (this relay fell behind); reloading", metadata: ["dropped": "\(drops - dropped)"])
                dropped = drops
                receiver.remoteChanges(.unreadable)
            }
            followedHandoff.handedOne()
        }
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
        let (started, changes) = self.changes.withLock { ($0.started, $0.subscription) }
        guard started else { return nil }
        do { try await client.flush(timeout: Self.barrierTimeout) } catch { return nil }
        let generation = client.reconnects
        // Each reading task hands its own subjects' notices over in order: both counts must be reached.
        let followed = followedCounts.withLock { $0.received }
        guard await handoff.wait(until: changes?.receivedMessages ?? 0), await followedHandoff.wait(until: followed) else { return nil }
        return generation
    }

    /// Milliseconds of uptime: when another relay was heard (`NoticeModeCheck`).
    static func uptimeMillis() -> Int64 { Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000) }

    /// Longer than this and the relay asks PostgreSQL instead (a round trip there is a millisecond or two).
    static let barrierTimeout = Duration.milliseconds(250)

    public var generation: Int? { self.changes.withLock { $0.started } ? client.reconnects : nil }

    /// Sends what is in the outbox (the relay's last presence delta), then closes the connection.
    public func stop() async {
        outboxInput.finish()
        snapshotRequestInput.finish()
        followedInput.finish()
        let (receiving, sending) = tasks.withLock { $0 }
        await sending?.value
        await client.close()
        for task in receiving { task.cancel() }
    }

    /// Sends the outbox in order; subscribes to the walkers this relay's connections receive, one
    /// subscription each, whose positions go to `receiver` on the client's loop.
    private func send(delivering receiver: any BusReceiver) async {
        var subscriptions: [String: NATSHandlerSubscription] = [:]
        var followed: [String: NATSHandlerSubscription] = [:]
        var noticeNumber: UInt64 = 0
        for await outgoing in outbox {
            let change: (adding: Set<String>, removing: Set<String>)
            let applied: CheckedContinuation<Void, Never>
            switch outgoing {
            case .notice(let notice):
                noticeNumber += 1
                publish(notice, number: noticeNumber)
                continue
            case .follow(let adding, let removing, let continuation):
                await changeSubscriptions(&followed, adding: adding, removing: removing)
                continuation.resume()
                continue
            case .presence(var message):
                if case .heartbeat(var heartbeat) = message {
                    heartbeat.noticesPerUser = publishesPerUser
                    message = .heartbeat(heartbeat)
                    // Once a second: `hw.changes` is read only while a relay publishing there alone is heard.
                    if followed[ClusterSubjects.changes] != nil, !noticeModes.forgetSilent(now: Self.uptimeMillis()) {
                        logger.notice("no relay publishing change notices on hw.changes alone is heard any more; stopped reading hw.changes")
                        await changeSubscriptions(&followed, adding: [], removing: [ClusterSubjects.changes])
                    }
                }
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
        for subscription in followed.values { await subscription.unsubscribe() }
    }

    /// Publishes `notice` encoded once: on `hw.changes` as it is (whole caches, and relays of the version before,
    /// read it there), and stamped with this relay's epoch and `number` on the subject of each user and timer shard
    /// its address names.
    private func publish(_ notice: ChangeNotice, number: UInt64) {
        let payload = ClusterCodec.encode(notice)
        client.publishDetached(subject: ClusterSubjects.changes, payload: payload)
        guard publishesPerUser else {
            noticeMessagesPublished.increment()
            return
        }
        let shards = Set(notice.address.timerOwners.map(TimerShards.shard(of:)))
        let subjects = notice.address.users.sorted().map(ClusterSubjects.changes(of:)) + shards.sorted().map(ClusterSubjects.timerChanges(of:))
        noticeMessagesPublished.increment(by: 1 + subjects.count)
        guard !subjects.isEmpty else { return }
        let stamped = NoticeStamp(node: node, epoch: epoch, number: number).stamped(payload)
        for subject in subjects { client.publishDetached(subject: subject, payload: stamped) }
    }

    /// Subscribes to the notice subjects `adding` and drops `removing`, then waits until the server has the
    /// subscriptions. Each followed subject's messages are counted and queued on the client's loop as they are read,
    /// so one count covers them all (`barrier`) and one task reads them in the order they came.
    private func changeSubscriptions(_ followed: inout [String: NATSHandlerSubscription], adding: Set<String>, removing: Set<String>) async {
        for subject in removing {
            await followed.removeValue(forKey: subject)?.unsubscribe()
        }
        for subject in adding where followed[subject] == nil {
            do {
                followed[subject] = try await client.subscribe(subject: subject) { [self] message in
                    followedCounts.withLock { $0.received += 1 }
                    if case .dropped = followedInput.yield(message.payload) {
                        // Never read: counted as handed over (the barrier must not wait for it), and told as a drop.
                        followedCounts.withLock { $0.dropped += 1 }
                        followedHandoff.handedOne()
                    }
                }
            } catch {
                logger.error("could not subscribe to change notices", metadata: ["subject": "\(subject)", "error": "\(error)"])
            }
        }
        followedSubjects.record(followed.count)
        if !adding.isEmpty { try? await client.flush(timeout: .seconds(1)) }
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
