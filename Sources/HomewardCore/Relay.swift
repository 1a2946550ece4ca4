import Dispatch
import HomewardProtocol
import Logging
import Metrics
import Synchronization

/// The relay's engine: every operation that reads or changes durable state is decided here, one at a
/// time, and its outcome is persisted before anyone hears of it; then replies and events go out.
///
/// An actor on a `QueueExecutor`: its isolation is the relay's one serial Dispatch queue, which the
/// compiler checks. Operations arrive through `mailbox`, from any thread, and `processMailbox`
/// decides each one to its end before it starts the next. That keeps the order operations were
/// submitted in, and no operation ever sees another's half-done state, which plain actor reentrancy
/// would allow. A relay does not wait for the store between operations: their changes go to the store in
/// batches, one transaction each, and what they make heard waits for its batch (`WriteJournal`,
/// `Relay+Writes`); on a shared store each batch is checked against the other relays' writes about the same
/// users, and a refused batch's requests are decided again.
///
/// Positions do not pass through here: `publish(_:from:)` runs on the sender's event loop and
/// touches only the presence table.
public actor Relay {
    public typealias Completion = @Sendable (Result<RelayReply, RelayError>) -> Void

    public nonisolated let presence = PresenceTable()
    public nonisolated let limits: RelayLimits
    /// This relay's name among the relays sharing one store (`--node-id`), sent in the sign-in reply.
    public nonisolated let node: String
    nonisolated let executor: QueueExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let store: any RelayStore
    /// Where the relays sharing the store meet (`LocalBus` when this relay is alone); see `Relay+Cluster`.
    let bus: any RelayBus
    /// `bus.isShared`, read once: the position path asks on every position.
    nonisolated let busIsShared: Bool
    /// Whether this relay hears only the change notices of the users and timer shards it follows (`Relay+Following`):
    /// a cache of connected users on a bus that does not read every notice.
    let followsUsers: Bool
    /// Whether this relay works out where each change notice goes (`NoticeAddress`): only when its bus publishes per
    /// user (`--change-notices per-user`); with `all` every notice goes to `hw.changes` alone and nothing reads it.
    let addressesNotices: Bool
    let hasher: PasswordHasher
    let hashing: PasswordHashingPool
    nonisolated let clock: @Sendable () -> Int64
    let logger: Logger
    /// Sent in the `ok` of every sign-in (protocol 1.1 `features`), as the relay configuration lists them.
    let features: [String]

    nonisolated let mailbox = Mutex(Mailbox())
    var state: RelayState
    /// Failed logins, hellos and watches and registrations, per username or client address.
    var signIns: SignInLimits

    /// Whose timers (deadlines, repeats, lost contact, expiry) this relay fires: those of the users in these
    /// shards (`TimerShards`). A relay alone fires all; on a shared bus each shard is fired by one relay at a
    /// time, the one the server's timer lease (`PostgresTimerLease`) gives it to.
    var timerShards: TimerShards
    /// What this relay keeps to work among others sharing its store (`ClusterLink`, `Relay+Cluster`); on a relay
    /// alone it stays as made and nothing reads it.
    var cluster: ClusterLink
    /// Which connection signed in with which token, so that revoking a token closes them (`afterCommand`).
    var signedInTokens = SignedInTokens()
    /// The write path's state: the journal, whether memory holds what the store may lack, failures and
    /// read-backs, revoked tokens, last-seen times, the cache's write versions, decisions in flight
    /// (`WritePath`). Changed only through its transitions.
    var writes = WritePath<WriteWaiter>()
    /// Each user's write version as the cache holds it (`WritePath.versions`): as loaded, moved on by every
    /// commit applied since (this relay's own, `writeFinished`, and the others', `Relay+Deltas`).
    var versions: UserVersions? { writes.versions }
    /// When this relay started (the rules' clock): the sessions loaded count their owners offline from then
    /// (`noteOfflineOwners`).
    let startedAt: Int64
    /// Points at the next deadline of `timerShards` (`armTimer`).
    var timer = DueTimer()
    /// Set by `close`: the store is about to close, nothing touches it any more.
    private var closed = false
    /// Where alarms go when the store fails, and what of them is not stored yet (`Relay+Spool`); nil: nowhere,
    /// an alarm then fails like any other write.
    let spool: (any AlarmSpool)?
    var spooled = SpooledAlarms()
    static let lastSeenWriteDelay: DispatchTimeInterval = .milliseconds(250)

    /// Fault tests only: how long each commit's notice waits before it is published (`publishConfirmedNotice`),
    /// so that a test can kill the relay between a commit and its notice.
    let testNoticeDelay: Duration?
    /// Gives memory the allocator holds freed back to the kernel (`malloc_trim`; the server's), after large evictions.
    let releaseFreedMemory: (@Sendable () -> Void)?

    /// What is pushed to closed apps and the webhook (see `PushPlanner`), and what sign-in replies announce.
    let push: PushSettings
    let planner: PushPlanner

    /// The metrics (those only a relay among others moves are `cluster.counters`).
    let counters: RelayCounters
    /// Who is due for eviction when, in a cache of connected users (`Relay+Eviction`).
    var eviction: EvictionState
    /// Writes refused because another relay wrote first: metrics and a rate-limited warning.
    let contention: WriteContention

    public init(store: any RelayStore, hasher: PasswordHasher = PasswordHasher(), limits: RelayLimits = RelayLimits(),
                safety: SafetySettings = SafetySettings(), shares: ShareSettings = ShareSettings(), features: [String] = [],
                node: String = "local", bus: any RelayBus = LocalBus(), ownsTimers: Bool = true, cache: CacheMode = .whole,
                clock: @escaping @Sendable () -> Int64 = Relay.systemMillis, logger: Logger = Logger(label: "homeward.relay"),
                metrics: any MetricsFactory = MetricsSystem.factory,
                push: PushSettings = PushSettings(), spool: (any AlarmSpool)? = nil,
                testNoticeDelay: Duration? = nil, releaseFreedMemory: (@Sendable () -> Void)? = nil) async throws {
        self.testNoticeDelay = testNoticeDelay
        self.releaseFreedMemory = releaseFreedMemory
        executor = QueueExecutor(label: "homeward.relay")
        counters = RelayCounters(metrics: metrics)
        eviction = EvictionState(grace: limits.cacheEvictionGrace)
        contention = WriteContention(metrics: metrics, logger: logger, clock: clock)
        self.store = store
        self.spool = spool
        self.push = push
        // A relay sharing its store does not see the others' token uses: it leaves expiry to the token's removal.
        self.planner = PushPlanner(settings: push, tokenLifetime: bus.isShared ? nil : limits.tokenLifetime)
        self.hasher = hasher
        self.hashing = PasswordHashingPool(limit: limits.concurrentPasswordHashes)
        self.limits = limits
        self.node = node
        self.bus = bus
        self.busIsShared = bus.isShared
        // A whole cache needs every commit of the cluster: only a cache of connected users may hear fewer.
        precondition(!bus.isShared || bus.readsEveryNotice || cache == .connected, "a whole cache must read every change notice")
        self.followsUsers = bus.isShared && !bus.readsEveryNotice && cache == .connected
        self.addressesNotices = bus.isShared && bus.publishesPerUser
        self.timerShards = ownsTimers ? .all : .none
        counters.timerShardsHeld.record(timerShards.size)
        self.cluster = ClusterLink(node: node, metrics: metrics)
        self.clock = clock
        self.logger = logger
        self.features = features
        let loadStarted = ContinuousClock.now
        let stored: StoredState
        var state: RelayState
        var versions: UserVersions?
        switch cache {
        case .whole:
            stored = try await store.load()
            state = RelayState(stored)
            versions = stored.versions
        case .connected:
            // What the timers fire on; users become resident as they sign in or a rule reads them (`admit`).
            stored = try await store.loadActive()
            state = RelayState(connected: stored)
            // A store that keeps versions (shared) answers with none for nobody; one that keeps none, nil.
            versions = try await store.versions(of: [])
        }
        let loadTime = ContinuousClock.now - loadStarted
        state.safety = safety
        state.shareSettings = shares
        let startedAt = clock()
        self.startedAt = startedAt
        for owner in state.sessions.values.map(\.owner) { state.ownerWentOffline(owner, at: startedAt) }
        self.state = state
        self.writes = WritePath(versions: versions)
        self.signIns = SignInLimits(limits)
        // Following nobody yet: what it fires (its shards, if any) is all it keeps.
        dropUnheardOwners()
        presence.seedLastSeen(stored.lastSeen)
        syncPresence(owners: state.owners.union(state.pausedUsers))
        counters.alarmsPending.record(state.alarms.count)
        counters.residentUsers.record(state.resident?.count ?? 0)
        logStart(stored, in: cache, tookMillis: loadTime.components.seconds * 1000 + loadTime.components.attoseconds / 1_000_000_000_000_000)
        // Alarm spool: alarms a crash left unstored go back in memory, and are stored by the first read-back.
        try await loadSpool()
        // Deadlines that passed while the relay was down fire now.
        submit(.fireDue(then: nil))
    }

    @Sendable public static func systemMillis() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    /// The safety timings in force (they survive storage failures; see `persist`).
    public var safety: SafetySettings { state.safety }

    /// Where share-link URLs point. Set by the server once it knows the port it listens on (before that,
    /// the configured or default base): with port 0 the port is only known after binding.
    public func setSharePublicURL(_ url: String) {
        state.shareSettings.publicURL = url
    }

    // MARK: Entry points, callable from any thread

    /// Serves one request. `done` is called with the reply before any event the request causes is sent,
    /// so a connection always sees its reply first.
    public nonisolated func serve(_ request: Request, auth: Authentication?, peer: String, sink: any ClientSink,
                                  done: @escaping Completion) {
        if auth == nil, !request.isAuthentication {
            done(.failure(.unauthenticated("sign in first: register, login or hello")))
            return
        }
        submit(.serve(request, auth: auth, peer: peer, sink: sink, done: done))
    }

    /// Relays a position to its audience; returns how many connections it was sent to.
    /// Runs on the caller's thread (an event loop): one lock, the sender's presence shard.
    @discardableResult
    public nonisolated func publish(_ position: Position, from username: String) -> Int {
        let fanout = presence.fanout(position, from: username, now: clock())
        // Published whenever anyone receives the walker: the others' relays may hold them.
        let remote = busIsShared && fanout.hasAudience
        if !fanout.sinks.isEmpty || remote {
            let message = EncodedMessage(Event.position(from: username, position).json, positionFrom: username)
            for sink in fanout.sinks { sink.send(message) }
            if remote { bus.publishPosition(message, of: username, restriction: fanout.restriction) }
        }
        if let session = fanout.arrived { submit(.arrive(session)) }
        return fanout.sinks.count
    }

    /// Forgets a closed connection: a user's, or a share-link viewer's (`ShareLink.viewerKey`).
    ///
    /// Joins the disconnects submitted just before it, if nothing else came between: many connections closing at
    /// once (a relay shutting down, a network outage) are one command, not one per connection.
    public nonisolated func disconnect(_ username: String, sink: any ClientSink) {
        let departure = Departure(key: username, sink: sink)
        let start = mailbox.withLock { mailbox in
            if !mailbox.commands.mergeIntoLast({ Self.join(departure, to: &$0) }) {
                mailbox.commands.append(.disconnect([departure]))
                mailbox.submitted += 1
            }
            guard !mailbox.running else { return false }
            mailbox.running = true
            return true
        }
        if start { startMailbox() }
    }

    /// Adds `departure` to `command` if it is a `disconnect`.
    private static func join(_ departure: Departure, to command: inout Command) -> Bool {
        guard case .disconnect(var departures) = command else { return false }
        // A placeholder meanwhile, so that the list has one owner and grows in place instead of being copied.
        command = .refresh
        departures.append(departure)
        command = .disconnect(departures)
        return true
    }

    /// Does whatever the safety extensions have due by the clock's current time.
    /// Tests with a manual clock call this after moving the clock.
    public nonisolated func runDueWork() async {
        await withCheckedContinuation { submit(.fireDue(then: $0)) }
    }

    /// Forgets a push subscription the push service no longer knows (it answered 404 or 410).
    public nonisolated func removePushSubscription(_ id: String) {
        submit(.removePushSubscription(id))
    }

    /// Waits until every operation submitted so far has finished (stored, and its replies and events
    /// sent), and stores pending last-seen times.
    public nonisolated func drain() async {
        await withCheckedContinuation { submit(.drain($0)) }
    }

    /// The relay's last operation before its store closes: waits for every operation submitted so far, stores
    /// the last-seen times of those who left and of those still connected (they leave with the relay), and from
    /// then on touches the store no more: requests are refused, timers, notices and later disconnects store
    /// nothing. A store closed after this sees no write or read come late.
    public nonisolated func close() async {
        await withCheckedContinuation { submit(.close($0)) }
    }

    /// Waits until every operation submitted so far has been decided; what they store may still be on
    /// its way to storage, and what they make heard waits for it (tests of the write path).
    nonisolated func decided() async {
        await withCheckedContinuation { submit(.decided($0)) }
    }

    // MARK: Mailbox

    /// One operation waiting its turn.
    enum Command: Sendable {
        case serve(Request, auth: Authentication?, peer: String, sink: any ClientSink, done: Completion)
        /// A signed-in request whose write another relay's refused, decided again (`Relay+Writes`).
        case decideAgain(Redecision)
        /// A password was hashed or checked off the queue; the rest of `register`/`login` runs in turn.
        case passwordChecked(PasswordCheck, peer: String, previous: Authentication?, sink: any ClientSink, done: Completion)
        /// Closed connections, in the order they closed (`disconnect`).
        case disconnect([Departure])
        /// A `push.subscribe` whose endpoint and keys were checked off the queue; stored in turn.
        case pushChecked(Request.PushSubscribe, auth: Authentication, done: Completion)
        case removePushSubscription(String)
        case arrive(String)
        case fireDue(then: CheckedContinuation<Void, Never>?)
        /// Residents whose grace passed are evicted (`Relay+Eviction`).
        case evictIdle(then: CheckedContinuation<Void, Never>?)
        case saveLastSeen
        case drain(CheckedContinuation<Void, Never>)
        case close(CheckedContinuation<Void, Never>)
        case decided(CheckedContinuation<Void, Never>)
        /// Other relays committed changes (`Mailbox.remoteNotices`): apply them (or reload), then deliver.
        case refresh
        /// The oldest held notice's wait is over (`Relay+Deltas`).
        case checkHeldNotices
        case remotePresence(PresenceMessage)
        case presenceTick
        case presenceCheck
        case presenceChange
        case presenceSnapshot(CheckedContinuation<PresenceSnapshot, Never>)
        case busLost
        case busBack
        /// Another relay missed its heartbeat (`Relay+Cluster`, `catchUpAfterSilence`).
        case peerSilent(String)
        /// Another relay's notices were not heard until now (`Relay+Cluster`, `catchUpWithMissedNotices`).
        case missedNotices(String)
        /// The timer lease gives this relay these shards (`Relay+Cluster`, `takeTimerShards`).
        case timerShards(TimerShards, CheckedContinuation<Void, Never>)
        case stopBus(CheckedContinuation<Void, Never>)
    }

    /// A closed connection: whose it was (a username, or a link's viewer key) and its sink.
    struct Departure: Sendable {
        let key: String
        let sink: any ClientSink
    }

    enum PasswordCheck: Sendable {
        case registered(username: String, name: String?, hash: String)
        case verified(username: String, valid: Bool)
    }

    struct Mailbox {
        var commands = FIFO<Command>()
        /// Whether a task is working through `commands`; at most one is.
        var running = false
        /// Notices of other relays not handled yet; one `refresh` command handles all that came before it.
        var remoteNotices: [ChangeNotice] = []
        var refreshQueued = false
        /// How the batch with the store ended, when it has and nobody has taken that yet: it is handled
        /// before the next command (see `Relay+Writes`).
        var written: Result<UserVersions?, any Error>?
        /// A command waiting for that (`writesSettled`) while the mailbox waits for it.
        var writeWaiter: CheckedContinuation<Result<UserVersions?, any Error>, Never>?
        /// Commands submitted and taken so far: while a command runs, `taken` is its number in submission
        /// order (`CacheFreshness`).
        var submitted = 0
        var taken = 0
    }

    /// What the mailbox's task does next.
    private enum Turn {
        case command(Command)
        case written(Result<UserVersions?, any Error>)
    }

    /// Queues a notice behind at most one `refresh` command.
    nonisolated func submitRefresh(_ notice: ChangeNotice) {
        let queue = mailbox.withLock { mailbox in
            mailbox.remoteNotices.append(notice)
            defer { mailbox.refreshQueued = true }
            return !mailbox.refreshQueued
        }
        if queue { submit(.refresh) }
    }

    /// The notices a `refresh` command handles.
    func takeRemoteNotices() -> [ChangeNotice] {
        mailbox.withLock { mailbox in
            defer {
                mailbox.remoteNotices = []
                mailbox.refreshQueued = false
            }
            return mailbox.remoteNotices
        }
    }

    nonisolated func submit(_ command: Command) {
        let start = mailbox.withLock { mailbox in
            mailbox.commands.append(command)
            mailbox.submitted += 1
            guard !mailbox.running else { return false }
            mailbox.running = true
            return true
        }
        if start { startMailbox() }
    }

    /// Starts the mailbox's task on the relay's queue (`QueueExecutor.Starter`): a request or a batch's end is
    /// one thread wake-up away from being handled, not two.
    nonisolated func startMailbox() {
        Task(executorPreference: executor.starter) { await self.processMailbox() }
    }

    /// Works through the mailbox until it is empty. What it awaits that is not isolated to the relay (a store's
    /// or the bus's own code up to its first suspension, and where that resumes) runs on the relay's queue too,
    /// where the mailbox waits anyway: a bus barrier or a notice's confirmation is then one wake-up of the relay's
    /// thread when the answer comes, not a hop through the global pool and another back.
    private func processMailbox() async {
        await takeTurns()
    }

    private func takeTurns() async {
        while let turn = mailbox.withLock({ mailbox -> Turn? in
            // A finished batch first: its replies wait, and the next batch can go to the store.
            if let written = mailbox.written {
                mailbox.written = nil
                return .written(written)
            }
            if let next = mailbox.commands.popFirst() {
                mailbox.taken += 1
                return .command(next)
            }
            mailbox.running = false
            return nil
        }) {
            let command: Command
            switch turn {
            case .written(let result):
                await writeFinished(result)
                continue
            case .command(let next):
                command = next
            }
            await handle(command)
            closeRevokedWhenStored()
            await afterCommand()
            startWrite()
        }
    }

    private func handle(_ command: Command) async {
        if closed { return refuseWhenClosed(command) }
        switch command {
        case .serve(let request, let auth, let peer, let sink, let done):
            // Alarm spool: an alarm operation goes on while the store is down, with no read-back first (`Relay+Spool`).
            if !servesWhileUnstored(request, auth: auth) {
                guard await stateIsStored() else { return done(.failure(Self.storageUnavailable)) }
            }
            await serveInTurn(request, auth: auth, peer: peer, sink: sink, done: done)
        case .decideAgain(let again):
            guard await stateIsStored() else { return again.done(.failure(Self.storageUnavailable)) }
            await catchUpBeforeRequest(for: again.auth.username)
            writes.decidingAgain(WritePath.Attempt(attempts: again.attempts, since: again.since))
            await serveSignedIn(again.request, auth: again.auth, peer: again.peer, sink: again.sink, done: again.done)
            writes.decidedAgain()
        case .passwordChecked(let check, let peer, let previous, let sink, let done):
            guard await stateIsStored() else { return done(.failure(Self.storageUnavailable)) }
            await finish(check, peer: peer, previous: previous, sink: sink, done: done)
        case .disconnect(let departures):
            detach(departures)
        case .pushChecked(let subscription, let auth, let done):
            guard await stateIsStored() else { return done(.failure(Self.storageUnavailable)) }
            await subscribePush(subscription, auth: auth, done: done)
        case .removePushSubscription(let id):
            guard await stateIsStored() else { return }
            await complete { state.removePushSubscription(id) }
        case .arrive(let session):
            // Lost during an outage: the walker's next position inside the destination arrives again.
            guard await stateIsStored() else { return }
            let participants = state.sessions[session].map { Set([$0.owner] + $0.invitees) } ?? []
            guard (try? await admit(participants)) != nil else { return }
            await complete { state.arrive(session, now: clock()) }
        case .fireDue(let continuation):
            // Whatever the timer pointed at is being done now; `armTimer` points it anew.
            timer.deadline = nil
            var more = false
            if await stateIsStored(), !timerShards.isEmpty { more = await fireDueWork() }
            // The next batch of a storm behind what waits meanwhile (the timer, armed at once, fires it too).
            if more, let continuation { submit(.fireDue(then: continuation)) } else { continuation?.resume() }
        case .evictIdle(let continuation):
            await sweepIdleResidents()
            continuation?.resume()
        case .saveLastSeen:
            await saveLastSeen()
        case .drain(let continuation):
            await saveLastSeen()
            try? await writesSettled()
            continuation.resume()
        case .decided(let continuation):
            continuation.resume()
        case .close(let continuation):
            let now = clock()
            for username in presence.localUsers() where !ShareLink.isViewerKey(username) {
                // Written just below: nothing to schedule.
                _ = writes.lastSeen(username, at: now)
            }
            await saveLastSeen()
            // The last batches reach the store before it closes.
            try? await writesSettled()
            closed = true
            timer.cancel()
            continuation.resume()
        case .refresh:
            await handleRemoteNotices(takeRemoteNotices())
        case .checkHeldNotices:
            await checkHeldNotices()
        case .remotePresence(let message):
            heard(message)
        case .presenceTick:
            presenceTick()
        case .presenceCheck:
            presenceCheck()
        case .presenceChange:
            sendPresenceDelta()
        case .presenceSnapshot(let continuation):
            continuation.resume(returning: presenceSnapshot())
        case .busLost:
            busLost()
        case .busBack:
            await busBack()
        case .peerSilent(let node):
            await catchUpAfterSilence(of: node)
        case .missedNotices(let node):
            await catchUpWithMissedNotices(of: node)
        case .timerShards(let shards, let continuation):
            await takeTimerShards(shards, then: continuation)
        case .stopBus(let continuation):
            await stopBusInTurn()
            continuation.resume()
        }
    }

    /// After `close`: nothing reaches the store; whoever waits is answered.
    private func refuseWhenClosed(_ command: Command) {
        switch command {
        case .decideAgain(let again):
            again.done(.failure(.storage("the relay is shutting down; try again")))
        case .serve(_, _, _, _, let done), .passwordChecked(_, _, _, _, let done), .pushChecked(_, _, let done):
            done(.failure(.storage("the relay is shutting down; try again")))
        case .disconnect(let departures):
            let now = clock()
            for departure in departures {
                if ShareLink.isViewerKey(departure.key) {
                    presence.detachViewer(departure.key, departure.sink)
                } else {
                    _ = presence.detach(departure.key, departure.sink, now: now)
                }
            }
        case .fireDue(let continuation), .evictIdle(let continuation):
            continuation?.resume()
        case .timerShards(let shards, let continuation):
            // Closed: nothing fires any more; the lease may release them.
            timerShards = shards
            continuation.resume()
        case .drain(let continuation), .decided(let continuation), .close(let continuation), .stopBus(let continuation):
            continuation.resume()
        case .presenceSnapshot(let continuation):
            // Closed: nobody is connected here any more.
            continuation.resume(returning: cluster.presenceFeed.snapshot(online: [], positions: [:]))
        default:
            break
        }
    }

    /// The user a request is about, whose writes elsewhere it must see (nil: a `hello` or `watch`, whose
    /// token is looked up in the store when the cache does not know it).
    private static func subject(of request: Request, auth: Authentication?) -> String? {
        if let auth { return auth.username }
        switch request {
        case .register(let username, _, _), .login(let username, _): return username
        default: return nil
        }
    }

    private func serveInTurn(_ request: Request, auth: Authentication?, peer: String, sink: any ClientSink,
                             done: @escaping Completion) async {
        await catchUpBeforeRequest(for: Self.subject(of: request, auth: auth))
        switch request {
        case .register(let username, let password, let name):
            guard limits.registrationsPerAddress == 0 || !signIns.registrations.isLimited(peer, now: clock()) else {
                return done(.failure(.rateLimited("too many new accounts from this address; try again later")))
            }
            // Whether the name is taken is known once its part is in the cache (a cache of connected users).
            do throws(RelayError) { try await admit([username]) } catch { return done(.failure(error)) }
            // Checked here as well as after hashing so that a taken name costs no hashing.
            guard state.users[username] == nil else { return done(.failure(.conflict("username \(username) is taken"))) }
            checkPassword(peer: peer, previous: auth, sink: sink, done: done) { hasher in
                .registered(username: username, name: name, hash: hasher.hash(password))
            }
        case .login(let username, let password):
            let now = clock()
            guard !signIns.usernameFailures.isLimited(username, now: now), !signIns.addressFailures.isLimited(peer, now: now) else {
                return done(.failure(.rateLimited("too many failed logins; try again later")))
            }
            // A read of the store, in order with what was decided before (a `register` of this name on its way).
            try? await writesSettled()
            let stored: String?
            do { stored = try await store.passwordHash(of: username) } catch {
                return done(.failure(.storage("\(error)")))
            }
            checkPassword(peer: peer, previous: auth, sink: sink, done: done) { hasher in
                guard let stored else {
                    hasher.burn(password)
                    return .verified(username: username, valid: false)
                }
                return .verified(username: username, valid: hasher.verify(password, against: stored))
            }
        case .hello(let token):
            await hello(token: token, peer: peer, previous: auth, sink: sink, done: done)
        case .pushSubscribe(let subscription):
            guard let auth else { return done(.failure(.unauthenticated("sign in first: register, login or hello"))) }
            // The endpoint check may resolve a host name: done off the queue, like password hashing,
            // so no other operation waits for DNS; the subscription is stored when it comes back.
            let check = push.checkSubscription
            Task {
                do throws(RelayError) {
                    try await check(subscription.endpoint, subscription.p256dh, subscription.auth)
                    self.submit(.pushChecked(subscription, auth: auth, done: done))
                } catch {
                    done(.failure(error))
                }
            }
        case .watch(let token):
            guard auth == nil else { return done(.failure(.forbidden("a signed-in connection cannot watch; open another"))) }
            await watch(token: token, peer: peer, sink: sink, done: done)
        default:
            guard let auth else { return done(.failure(.unauthenticated("sign in first: register, login or hello"))) }
            await serveSignedIn(request, auth: auth, peer: peer, sink: sink, done: done)
        }
    }

    // MARK: Schedules

    /// Fires what is due, for at most `dueOwnersPerBatch` owners, those due earliest first (`RelayState.ownersDue`, from
    /// the deadline index): a storm (every session's lost contact due at once
    /// after a restart) goes in batches, each batch's users admitted with one read and its outcome one decision, and the
    /// mailbox takes what waits between batches. Returns whether owners beyond this batch have work due (the timer,
    /// armed at a deadline that has passed, fires the next batch at once).
    @discardableResult
    func fireDueWork() async -> Bool {
        var raised = 0
        let now = clock()
        let due = state.ownersDue(at: now, shards: timerShards, limit: Self.dueOwnersPerBatch)
        guard !due.owners.isEmpty else {
            armTimer()
            return false
        }
        let batch = Set(due.owners)
        do throws(RelayError) {
            try await admitNeeded { state.usersNeeded(forDueAt: now, shards: timerShards, owners: batch) }
        } catch {
            // Nothing fires on a part of the cache that may lack what it reads; tried again a second later.
            logger.error("could not read the users whose timers are due", metadata: ["error": "\(error)"])
            timer.cancel()
            executor.queue.asyncAfter(deadline: .now() + .milliseconds(Int(Self.readBackInterval))) { [weak self] in
                self?.submit(.fireDue(then: nil))
            }
            return false
        }
        await complete {
            let before = state.alarms.count
            let outcome = state.fireDue(now: now, presence: presence, shards: timerShards, owners: batch)
            raised = max(0, state.alarms.count - before)
            return outcome
        }
        if raised > 0 { counters.alarmsRaised.increment(by: raised) }
        armTimer()
        return due.more
    }

    /// Owners whose due work one turn of the mailbox fires (`fireDueWork`): a few hundred owners' users are one slice
    /// read and one batch to the store, where a whole storm would be every due owner's in one.
    package static let dueOwnersPerBatch = 256

    /// Points the one timer at the next deadline; when it fires, the due work takes its turn.
    func armTimer() {
        // A relay fires only the timers of its shards; it keeps the others' deadlines in its cache.
        armTimer(at: timerShards.isEmpty ? nil : Self.nextDeadline(of: &state, in: timerShards))
    }

    /// Points the one timer at `next` (nil: nowhere).
    func armTimer(at next: Int64?) {
        guard next != timer.deadline else { return }
        timer.cancel()
        timer.deadline = next
        guard let next else { return }
        let delay = max(0, next - clock())
        let source = DispatchSource.makeTimerSource(queue: executor.queue)
        source.schedule(deadline: .now() + .milliseconds(Int(min(delay, Int64(Int32.max)))), leeway: .milliseconds(10))
        source.setEventHandler { [weak self] in self?.submit(.fireDue(then: nil)) }
        source.resume()
        timer.source = source
    }

    /// Read in place, as `audienceUpdates` reads: asked after every operation, it copied the whole state each time. The
    /// index answers (`RelayState+Deadlines`): no walk of every deadline.
    private static func nextDeadline(of state: inout RelayState, in shards: TimerShards) -> Int64? {
        state.nextDeadlineFromIndex(in: shards)
    }

    func deliver(_ message: EncodedMessage, to username: String) {
        for sink in presence.sinks(of: username) { sink.send(message) }
    }

}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
