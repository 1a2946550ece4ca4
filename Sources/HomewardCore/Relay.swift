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
    private let hasher: PasswordHasher
    private let hashing: PasswordHashingPool
    nonisolated let clock: @Sendable () -> Int64
    let logger: Logger
    /// Sent in the `ok` of every sign-in (protocol 1.1 `features`), as the relay configuration lists them.
    private let features: [String]

    nonisolated let mailbox = Mutex(Mailbox())
    var state: RelayState
    private var usernameFailures: SlidingWindowLimit
    private var addressFailures: SlidingWindowLimit
    /// Accounts created per client address.
    private var registrations: SlidingWindowLimit
    /// Failed `watch` attempts per client address.
    private var watchFailures: SlidingWindowLimit
    /// Failed `hello` attempts (unknown, revoked or expired tokens) per client address (`Relay+SignIn`).
    var helloFailures: SlidingWindowLimit

    /// Whose timers (deadlines, repeats, lost contact, expiry) this relay fires: those of the users in these
    /// shards (`TimerShards`). A relay alone fires all; on a shared bus each shard is fired by one relay at a
    /// time, the one the server's timer lease (`PostgresTimerLease`) gives it to.
    var timerShards: TimerShards
    /// What this relay keeps to work among others sharing its store (`ClusterLink`, `Relay+Cluster`); on a relay
    /// alone it stays as made and nothing reads it.
    var cluster: ClusterLink
    /// Which connection signed in with which token, so that revoking a token closes them (`afterCommand`).
    var signedInTokens = SignedInTokens()
    /// Tokens this command revoked.
    var revokedTokens: [String] = []
    /// The request being decided again after its write was refused (`decideAgain`), while it is.
    var redecision: Redecision?
    /// The state a checked write was decided from (`rememberingDecisionBase`): what its changes name only by id (a
    /// session it ended) is looked up there to find the users it concerns (`RelayState.writeScope`).
    var decidedFrom: RelayState?
    /// Each user's write version as the cache holds it (`RelayStore.applyChecked`): as loaded, moved on by every
    /// commit applied since (this relay's own, `persist`, and the others', `Relay+Deltas`). Nil when the store
    /// keeps none (a relay alone). Kept beside the state, not in it: a version only moves on with a commit, and a
    /// decision does not copy every user's version while `decidedFrom` holds the state from before it.
    var versions: UserVersions?
    private var timer: (any DispatchSourceTimer)?
    private var timerDeadline: Int64?
    /// Last-seen times not stored yet. They only tell friends when someone was last online, so they are
    /// written together, within `lastSeenWriteDelay` or at `drain`, rather than one commit (one fsync) per
    /// disconnect: after a network blip, thousands of those would queue ahead of the next alarm.
    private var unsavedLastSeen: [String: Int64] = [:]
    /// Set when a write failed, until the state is read back from storage; see `reloadFromStore`.
    var unstored = false
    /// Set by `close`: the store is about to close, nothing touches it any more.
    private var closed = false
    /// What a relay alone decided and has not stored or made heard yet (`Relay+Writes`).
    var journal = WriteJournal<WriteWaiter>()
    /// How many writes failed so far, and the last failure (see `writesSettled`).
    var writeFailures = 0
    var lastWriteError = ""
    /// When the cache was last read from storage (or a read was tried).
    var lastReadBack: Int64 = 0
    /// Where alarms go when the store fails, and what of them is not stored yet (`Relay+Spool`); nil: nowhere,
    /// an alarm then fails like any other write.
    let spool: (any AlarmSpool)?
    var spooled = SpooledAlarms()
    static let lastSeenWriteDelay: DispatchTimeInterval = .milliseconds(250)

    /// Fault tests only: how long each commit's notice waits before it is published (`publishConfirmedNotice`),
    /// so that a test can kill the relay between a commit and its notice.
    let testNoticeDelay: Duration?

    /// What is pushed to closed apps and the webhook (see `PushPlanner`), and what sign-in replies announce.
    let push: PushSettings
    let planner: PushPlanner

    private let alarmsRaised: Counter
    private let alarmsAcknowledged: Counter
    let alarmsPending: Gauge
    /// Alarms delivered while the store failed and not stored yet.
    let alarmsSpooled: Gauge
    private let usersOnline: Gauge
    /// How many timer shards this relay fires.
    let timerShardsHeld: Gauge
    /// How often the cache was read whole from the store, and how many other relays' commits it applied instead.
    let reloads: Counter
    let appliedCommits: Counter
    /// Writes refused because another relay wrote first: metrics and a rate-limited warning.
    let contention: WriteContention

    public init(store: any RelayStore, hasher: PasswordHasher = PasswordHasher(), limits: RelayLimits = RelayLimits(),
                safety: SafetySettings = SafetySettings(), shares: ShareSettings = ShareSettings(), features: [String] = [],
                node: String = "local", bus: any RelayBus = LocalBus(), ownsTimers: Bool = true,
                clock: @escaping @Sendable () -> Int64 = Relay.systemMillis, logger: Logger = Logger(label: "homeward.relay"),
                metrics: any MetricsFactory = MetricsSystem.factory,
                push: PushSettings = PushSettings(), spool: (any AlarmSpool)? = nil,
                testNoticeDelay: Duration? = nil) async throws {
        self.testNoticeDelay = testNoticeDelay
        executor = QueueExecutor(label: "homeward.relay")
        alarmsRaised = Counter(label: "homeward_alarms_raised_total", factory: metrics)
        alarmsAcknowledged = Counter(label: "homeward_alarms_acknowledged_total", factory: metrics)
        alarmsPending = Gauge(label: "homeward_alarms_pending", factory: metrics)
        alarmsSpooled = Gauge(label: "homeward_alarms_spooled", factory: metrics)
        usersOnline = Gauge(label: "homeward_authenticated_users", factory: metrics)
        timerShardsHeld = Gauge(label: "homeward_timer_shards_held", factory: metrics)
        reloads = Counter(label: "homeward_cache_reloads_total", factory: metrics)
        appliedCommits = Counter(label: "homeward_cache_commits_applied_total", factory: metrics)
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
        self.timerShards = ownsTimers ? .all : .none
        timerShardsHeld.record(timerShards.size)
        self.cluster = ClusterLink(node: node)
        self.clock = clock
        self.logger = logger
        self.features = features
        let stored = try await store.load()
        var state = RelayState(stored)
        state.safety = safety
        state.shareSettings = shares
        let startedAt = clock()
        for owner in state.sessions.values.map(\.owner) { state.ownerWentOffline(owner, at: startedAt) }
        self.state = state
        self.versions = stored.versions
        self.usernameFailures = SlidingWindowLimit(limit: limits.loginFailuresPerUsername, window: limits.loginFailureWindow)
        self.addressFailures = SlidingWindowLimit(limit: limits.loginFailuresPerAddress, window: limits.loginFailureWindow)
        self.registrations = SlidingWindowLimit(limit: limits.registrationsPerAddress, window: limits.registrationWindow)
        self.watchFailures = SlidingWindowLimit(limit: limits.watchFailuresPerAddress, window: limits.watchFailureWindow)
        self.helloFailures = SlidingWindowLimit(limit: limits.helloFailuresPerAddress, window: limits.loginFailureWindow)
        presence.seedLastSeen(stored.lastSeen)
        syncPresence(owners: state.owners.union(state.pausedUsers))
        alarmsPending.record(state.alarms.count)
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
    public nonisolated func disconnect(_ username: String, sink: any ClientSink) {
        submit(.disconnect(username, sink))
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
        case disconnect(String, any ClientSink)
        /// A `push.subscribe` whose endpoint and keys were checked off the queue; stored in turn.
        case pushChecked(Request.PushSubscribe, auth: Authentication, done: Completion)
        case removePushSubscription(String)
        case arrive(String)
        case fireDue(then: CheckedContinuation<Void, Never>?)
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
        /// The timer lease gives this relay these shards (`Relay+Cluster`, `takeTimerShards`).
        case timerShards(TimerShards, CheckedContinuation<Void, Never>)
        case stopBus(CheckedContinuation<Void, Never>)
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
        if start { Task { await self.processMailbox() } }
    }

    func processMailbox() async {
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
            redecision = again
            await serveSignedIn(again.request, auth: again.auth, peer: again.peer, sink: again.sink, done: again.done)
            redecision = nil
        case .passwordChecked(let check, let peer, let previous, let sink, let done):
            guard await stateIsStored() else { return done(.failure(Self.storageUnavailable)) }
            await finish(check, peer: peer, previous: previous, sink: sink, done: done)
        case .disconnect(let username, let sink):
            detach(username, sink)
        case .pushChecked(let subscription, let auth, let done):
            guard await stateIsStored() else { return done(.failure(Self.storageUnavailable)) }
            await subscribePush(subscription, auth: auth, done: done)
        case .removePushSubscription(let id):
            guard await stateIsStored() else { return }
            await complete { state.removePushSubscription(id) }
        case .arrive(let session):
            // Lost during an outage: the walker's next position inside the destination arrives again.
            guard await stateIsStored() else { return }
            await complete { state.arrive(session, now: clock()) }
        case .fireDue(let continuation):
            // Whatever the timer pointed at is being done now; `armTimer` points it anew.
            timerDeadline = nil
            if await stateIsStored(), !timerShards.isEmpty { await fireDueWork() }
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
            for username in presence.localUsers() where !ShareLink.isViewerKey(username) { unsavedLastSeen[username] = now }
            await saveLastSeen()
            // The last batches reach the store before it closes.
            try? await writesSettled()
            closed = true
            timer?.cancel()
            timer = nil
            timerDeadline = nil
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
        case .disconnect(let username, let sink):
            if ShareLink.isViewerKey(username) { presence.detachViewer(username, sink) } else { _ = presence.detach(username, sink, now: clock()) }
        case .fireDue(let continuation):
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
            guard limits.registrationsPerAddress == 0 || !registrations.isLimited(peer, now: clock()) else {
                return done(.failure(.rateLimited("too many new accounts from this address; try again later")))
            }
            // Checked here as well as after hashing so that a taken name costs no hashing.
            guard state.users[username] == nil else { return done(.failure(.conflict("username \(username) is taken"))) }
            checkPassword(peer: peer, previous: auth, sink: sink, done: done) { hasher in
                .registered(username: username, name: name, hash: hasher.hash(password))
            }
        case .login(let username, let password):
            let now = clock()
            guard !usernameFailures.isLimited(username, now: now), !addressFailures.isLimited(peer, now: now) else {
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

    // MARK: Authentication

    /// Hashes or verifies a password on the hashing pool, then continues in turn with `finish`.
    private func checkPassword(peer: String, previous: Authentication?, sink: any ClientSink, done: @escaping Completion,
                               _ work: @escaping @Sendable (PasswordHasher) -> PasswordCheck) {
        let hasher = self.hasher
        let hashing = self.hashing
        Task {
            let check = await hashing.run { work(hasher) }
            self.submit(.passwordChecked(check, peer: peer, previous: previous, sink: sink, done: done))
        }
    }

    private func finish(_ check: PasswordCheck, peer: String, previous: Authentication?, sink: any ClientSink,
                        done: @escaping Completion) async {
        let now = clock()
        do throws(RelayError) {
            switch check {
            case .registered(let username, let name, let hash):
                let token = Token.mint()
                let auth = Authentication(username: username, tokenHash: Token.hash(token))
                // Another relay may have registered the name since this cache was loaded: decided again then.
                try await rememberingDecisionBase { () async throws(RelayError) in
                    var outcome = try state.register(username: username, name: name, passwordHash: hash, now: now)
                    outcome.changes += state.issueToken(auth.tokenHash, to: username, now: now, lifetime: limits.tokenLifetime)
                    try await persist(outcome.changes)
                }
                // Signing in sends what the state holds: stored first, with everything decided before.
                try await writesSettled()
                registrations.record(peer, now: now)
                await signIn(auth, previous: previous, sink: sink,
                             reply: signInReply(username, token: token), done: done)
            case .verified(let username, let valid):
                guard valid else {
                    usernameFailures.record(username, now: now)
                    addressFailures.record(peer, now: now)
                    throw .unauthenticated("wrong username or password")
                }
                usernameFailures.reset(username)
                let token = Token.mint()
                let auth = Authentication(username: username, tokenHash: Token.hash(token))
                try await rememberingDecisionBase { () async throws(RelayError) in
                    try await persist(state.issueToken(auth.tokenHash, to: username, now: now, lifetime: limits.tokenLifetime))
                }
                // Signing in sends what the state holds: stored first, with everything decided before.
                try await writesSettled()
                // Not limited like `hello`: the password gets the owner in, whoever holds the connections.
                makeRoom(for: username, signingIn: sink, previous: previous)
                await signIn(auth, previous: previous, sink: sink,
                             reply: signInReply(username, token: token), done: done)
            }
        } catch {
            done(.failure(error))
        }
    }

    private func hello(token: String, peer: String, previous: Authentication?, sink: any ClientSink,
                       done: @escaping Completion) async {
        let hash = Token.hash(token)
        guard await mayCheckToken(hash, from: peer) else {
            return done(.failure(.rateLimited("too many failed sign-ins with a token from this address; try again later")))
        }
        do throws(RelayError) {
            let (username, used) = try useToken(hash, from: peer)
            try checkConnectionLimit(username, previous: previous)
            try await persist(used)
            try await writesSettled()
            await signIn(Authentication(username: username, tokenHash: hash), previous: previous, sink: sink,
                         reply: signInReply(username, token: nil), done: done)
        } catch {
            done(.failure(error))
        }
    }

    /// The `ok` reply to `register`, `login` and `hello`.
    private func signInReply(_ username: String, token: String?) -> [(String, JSONValue)] {
        SignInReply(user: state.profile(username), token: token, features: features,
                    vapidPublicKey: push.vapidPublicKey, node: node).fields
    }

    private func checkConnectionLimit(_ username: String, previous: Authentication?) throws(RelayError) {
        let already = previous?.username == username ? 1 : 0
        guard presence.connectionCount(of: username) - already < limits.maxConnectionsPerUser else {
            throw .rateLimited("more than \(limits.maxConnectionsPerUser) connections for \(username)")
        }
    }

    /// Attaches the connection, replies, then sends what the user missed. Everything decided before is
    /// stored (`writesSettled`): the reply and the backlog show the state as it is.
    private func signIn(_ auth: Authentication, previous: Authentication?, sink: any ClientSink,
                        reply: [(String, JSONValue)], done: @escaping Completion) async {
        // Signing in again as the same user on the same connection changes nothing anyone can see.
        if let previous, previous.username == auth.username {
            signedInTokens.remember(auth.tokenHash, sink, as: auth.username)
            done(.success(RelayReply(reply, auth: .authenticated(auth))))
            return
        }
        if let previous { detach(previous.username, sink) }
        let now = clock()
        let first = presence.attach(auth.username, sink, now: now)
        signedInTokens.remember(auth.tokenHash, sink, as: auth.username)
        await syncInterest()
        if first { await tellOtherRelaysOnline(auth.username) }
        done(.success(RelayReply(reply, auth: .authenticated(auth))))
        let backlog = state.backlog(for: auth.username)
        for message in backlog { sink.send(EncodedMessage(message)) }
        if cluster.backlogShown != nil { cluster.backlogShown?[auth.username] = backlog }
        await complete { Outcome(changes: state.markAlarmsDelivered(to: auth.username, now: now)) }
        // Meeting points and messages that waited: stored as delivered before they go out.
        await complete { state.deliverQueued(to: auth.username, now: now) }
        if first {
            if !presence.isOnlineElsewhere(auth.username) { announcePresence(auth.username, online: true, at: now) }
            await complete { state.ownerCameBack(auth.username) }
        }
        usersOnline.record(presence.onlineUserCount)
    }

    /// A share link's viewer (protocol 1.1): checks the token, attaches the connection under the link's
    /// viewer key (so the owner's positions reach it by the usual fan-out), replies, then sends what is
    /// going on (alarms, lost contact). Failures count per address; over the limit nothing is checked.
    private func watch(token: String, peer: String, sink: any ClientSink, done: @escaping Completion) async {
        let now = clock()
        guard !watchFailures.isLimited(peer, now: now) else {
            return done(.failure(.rateLimited("too many failed watch attempts from this address; try again later")))
        }
        // The reply and what follows show the state: stored first, with everything decided before.
        do throws(RelayError) { try await writesSettled() } catch { return done(.failure(error)) }
        let hash = Token.hash(token)
        let link = state.sharesByHash[hash].flatMap { state.shares[$0] }
        let hidden = await fetchLastPosition(of: link?.owner, for: link.map { [$0.viewerKey] } ?? [])
        do throws(RelayError) {
            let (share, reply) = try state.watch(tokenHash: hash, now: now, presence: presence, hiddenElsewhere: !hidden.isEmpty)
            // A valid token: not a failure to count, even when there is no room.
            guard presence.connectionCount(of: share.viewerKey) < limits.viewersPerShare else {
                return done(.failure(.rateLimited("more than \(limits.viewersPerShare) viewers on this share link")))
            }
            presence.attachViewer(share.viewerKey, sink)
            await syncInterest()
            let trail = hidden.isEmpty && state.trailShownToViewers(of: share.owner)
                ? trailForReply(of: share.owner, shownTo: share.viewerKey) : nil
            done(.success(RelayReply(reply.fields + [("trail", trail?.json ?? .null)], auth: .watching(viewerKey: share.viewerKey))))
            for message in state.viewerBacklog(share, presence: presence) { sink.send(EncodedMessage(message)) }
        } catch {
            watchFailures.record(peer, now: now)
            done(.failure(error))
        }
    }

    func detach(_ username: String, _ sink: any ClientSink) {
        if ShareLink.isViewerKey(username) {
            presence.detachViewer(username, sink)
            return
        }
        signedInTokens.forget(sink)
        let now = clock()
        guard presence.detach(username, sink, now: now) else { return }
        if unsavedLastSeen.isEmpty {
            executor.queue.asyncAfter(deadline: .now() + Self.lastSeenWriteDelay) { [weak self] in
                self?.submit(.saveLastSeen)
            }
        }
        unsavedLastSeen[username] = now
        usersOnline.record(presence.onlineUserCount)
        presenceLeft(username, at: now)
        // Still connected to another relay: nobody sees a change.
        guard !presence.isOnlineElsewhere(username) else { return }
        announcePresence(username, online: false, at: now)
        state.ownerWentOffline(username, at: now)
        armTimer()
    }

    private func saveLastSeen() async {
        guard !unsavedLastSeen.isEmpty else { return }
        let changes = unsavedLastSeen.map { StoreChange.lastSeen(username: $0.key, at: $0.value) }
        unsavedLastSeen.removeAll()
        do {
            try await persist(changes)
        } catch {
            logger.warning("could not store last-seen times", metadata: ["error": "\(error)"])
        }
    }

    /// Tells `username`'s friends, as friends are now, once what was decided before is stored (a friendship
    /// on its way is not heard of through a presence event first).
    func announcePresence(_ username: String, online: Bool, at time: Int64) {
        let message = EncodedMessage(Event.presence(username: username, online: online, lastSeen: time).json)
        let friends = state.friends(of: username)
        afterStored { relay in
            for friend in friends { relay.deliver(message, to: friend) }
        }
    }

    // MARK: Signed-in requests

    private func serveSignedIn(_ request: Request, auth: Authentication, peer: String, sink: any ClientSink,
                               done: @escaping Completion) async {
        // Refused because another relay wrote first about one of its users: decided again (`decideAgain`).
        let again = Redecision(request: request, auth: auth, peer: peer, sink: sink, done: done,
                               attempts: (redecision?.attempts ?? 0) + 1, since: redecision?.since ?? ContinuousClock.now)
        let refused: @Sendable (isolated Relay) async -> Void = { relay in relay.decideAgain(again) }
        do throws(RelayError) {
            let decided = try await rememberingDecisionBase { () async throws(RelayError) in
                try await decideAndStore(request, auth: auth, sink: sink)
            }
            let audience = audienceUpdates(owners: decided.outcome.audienceChanged)
            let answer: @Sendable (isolated Relay, Outcome) async -> Void = { relay, outcome in
                if decided.authChange == .signedOut { relay.detach(auth.username, sink) }
                // Audiences change before the reply so that a position sent right after an ok
                // already reaches the new observer.
                relay.applyAudience(audience)
                await relay.syncInterest()
                done(.success(RelayReply(relay.replyAfterAudience(outcome), auth: decided.authChange)))
                relay.deliverEvents(outcome)
                // Counted once stored (or spooled): a request decided again on a fresh cache is one alarm.
                if decided.alarmRaised { relay.alarmsRaised.increment() }
                if decided.alarmAcknowledged { relay.alarmsAcknowledged.increment() }
            }
            switch decided.write {
            case .persisted:
                await whenStored({ relay in await answer(relay, decided.outcome) }, orElse: { _, error in done(.failure(error)) },
                                 orRefused: refused)
            case .staged(let ifLost):
                // Alarm spool: when its batch fails, the alarm operation is spooled and heard unstored (`Relay+Spool`).
                await whenStored({ relay in await answer(relay, decided.outcome) }, orElse: { relay, error in
                    do throws(RelayError) { try await relay.spoolAndSend(ifLost) } catch { return done(.failure(error)) }
                    await answer(relay, ifLost.outcome)
                }, orRefused: refused)
            case .spooled:
                // Alarm spool: the store is down; spooled, it is heard now, marked `"stored": false`.
                await answer(self, decided.outcome)
            }
        } catch {
            // A refusal is an answer like any other: in turn, after what was decided before is stored (it may
            // tell of it: "already requested"), and decided again when that was refused.
            await answerInTurn(done, error, orRefused: refused)
        }
    }

    /// A signed-in request as decided (`decideAndStore`): what it makes heard once stored, and how it is stored.
    private struct Decided: Sendable {
        var outcome: Outcome
        var authChange: RelayReply.AuthChange
        var write: AlarmWrite
        var alarmRaised = false
        var alarmAcknowledged = false
    }

    /// Decides a signed-in request on the cache and stores the outcome; nothing is sent yet.
    private func decideAndStore(_ request: Request, auth: Authentication, sink: any ClientSink) async throws(RelayError) -> Decided {
        let user = auth.username
        let now = clock()
        var outcome: Outcome
        var authChange = RelayReply.AuthChange.unchanged
        switch request {
        case .logout, .logoutAll:
            // The connection is signed out (detached) once this is stored, before its reply.
            try await persist(state.logOut(user, token: auth.tokenHash, all: request == .logoutAll).changes)
            authChange = .signedOut
            outcome = Outcome()
        case .friendRequest(let target): outcome = try state.requestFriend(user, target, now: now)
        case .friendAccept(let other): outcome = try state.acceptFriend(user, other, now: now)
        case .friendDecline(let other): outcome = try state.declineFriend(user, other)
        case .friendRemove(let other): outcome = try state.removeFriend(user, other)
        case .friendList: outcome = state.friendList(user, presence: presence)
        case .userSearch(let query): outcome = try state.searchUsers(user, query, now: now)
        case .userBlock(let other): outcome = try state.block(user, other, now: now)
        case .userUnblock(let other): outcome = try state.unblock(user, other)
        case .userBlocks: outcome = state.blockList(user)
        case .authSessions: outcome = state.tokenList(user, current: auth.tokenHash, now: now, lifetime: limits.tokenLifetime)
        case .authRevoke(let id): outcome = try state.revokeToken(user, id: id)
        case .sessionStart(let options): outcome = try state.startSession(user, options, now: now)
        case .sessionCheckin(let id, let checkInBy): outcome = try state.checkIn(user, id, checkInBy: checkInBy)
        case .sessionInvite(let id, let invite): outcome = try state.inviteToSession(user, id, invite: invite)
        case .sessionAccept(let id):
            let hidden = await fetchLastPosition(of: state.sessions[id]?.owner, for: [user])
            outcome = try state.acceptSession(user, id, presence: presence, hiddenElsewhere: !hidden.isEmpty)
        case .sessionDecline(let id): outcome = try state.declineSession(user, id)
        case .sessionLeave(let id): outcome = try state.leaveSession(user, id)
        case .sessionEnd(let id): outcome = try state.endSession(user, id, now: now)
        case .sessionList: outcome = state.listSessions(user)
        case .alarmRaise(let raise): outcome = try state.raiseAlarm(user, raise, presence: presence, now: now)
        case .alarmAck(let id): outcome = try state.acknowledgeAlarm(user, id)
        case .alarmCancel(let id, let reason): outcome = try state.cancelAlarm(user, id, reason: reason, now: now)
        case .alarmContacts(let usernames): outcome = try state.alarmContacts(user, set: usernames)
        case .pushUnsubscribe(let id): outcome = try state.unsubscribePush(user, id)
        case .pushList: outcome = state.listPush(user)
        case .shareCreate(let id, let ttl): outcome = try state.createShare(user, id, ttl: ttl, token: Token.mint(), now: now)
        case .shareList: outcome = state.listShares(user, now: now)
        case .shareRevoke(let id): outcome = try state.revokeShare(user, id)
        case .shareAlways(let with): outcome = try state.shareAlways(user, with: with)
        case .friendLocation(let friend):
            // Their last position lives on their relay when they are connected to another one.
            let hidden = state.standing[friend]?.contains(user) == true ? await fetchLastPosition(of: friend, for: [user]) : []
            outcome = try state.friendLocation(user, friend, presence: presence, now: now, hiddenElsewhere: !hidden.isEmpty)
        case .locationPause(let from, let until): outcome = try state.pauseLocation(user, from: from, until: until)
        case .locationResume(let from): outcome = try state.resumeLocation(user, from: from)
        case .meetPropose(let proposal): outcome = try state.proposeMeeting(user, proposal, presence: presence, now: now)
        case .meetAccept(let id): outcome = try state.respondToMeeting(user, id, .accepted)
        case .meetDecline(let id): outcome = try state.respondToMeeting(user, id, .declined)
        case .meetCancel(let id): outcome = try state.cancelMeeting(user, id)
        case .meetList: outcome = state.listMeetings(user)
        case .msgSend(let to, let text): outcome = try state.sendMessage(user, to: to, text: text, presence: presence, now: now)
        case .msgRead(let id): outcome = try state.readMessage(user, id, now: now)
        case .friendTrail(let walker): outcome = try await friendTrail(walker, for: user, now: now)
        case .register, .login, .hello, .position, .ping, .watch, .pushSubscribe:
            throw .invalid("not served here")
        }
        let changed = !outcome.changes.isEmpty
        // Alarm spool: an alarm operation whose write fails is spooled and delivered anyway (`Relay+Spool`).
        let write = try await persistOrSpool(&outcome, request: request, now: now)
        var decided = Decided(outcome: outcome, authChange: authChange, write: write)
        if case .alarmRaise = request { decided.alarmRaised = true }
        if case .alarmAck = request, changed { decided.alarmAcknowledged = true }
        return decided
    }

    private func subscribePush(_ subscription: Request.PushSubscribe, auth: Authentication, done: @escaping Completion) async {
        do throws(RelayError) {
            let outcome = try await rememberingDecisionBase { () async throws(RelayError) in
                let outcome = try state.subscribePush(auth.username, tokenHash: auth.tokenHash, subscription,
                                                      limit: push.maxSubscriptionsPerUser, now: clock())
                try await persist(outcome.changes)
                return outcome
            }
            await whenStored({ _ in done(.success(RelayReply(outcome.reply, auth: .unchanged))) },
                             orElse: { _, error in done(.failure(error)) })
        } catch {
            await answerInTurn(done, error)
        }
    }

    // MARK: Delivery

    /// Stores an outcome together with the pushes and webhook calls it causes (one transaction), then
    /// wakes the delivery worker.
    func persistWithPushes(_ outcome: inout Outcome, now: Int64) async throws(RelayError) {
        let pushes = planner.plan(outcome, state: state, presence: presence, now: now)
        outcome.changes += pushes
        try await persist(outcome.changes)
        if !pushes.isEmpty { await whenStored { relay in relay.push.outboxChanged() } }
    }

    /// Sends an outcome's events, each encoded once for all its recipients; audience changes must
    /// already be applied.
    private func deliverEvents(_ outcome: Outcome) {
        for (message, recipients) in outcome.encodedEvents() {
            for username in recipients { deliver(message, to: username) }
        }
        if busIsShared {
            addToNotice(outcome.events)
            cluster.outgoing.closeViewers += outcome.closeViewers
        }
        if cluster.backlogShown != nil {
            // The bus is lost: what users hear meanwhile is not "missed" when it is back (see `busBack`).
            for event in outcome.events { cluster.backlogShown?[event.to, default: []].append(event.message) }
        }
        closeViewers(outcome.closeViewers)
        alarmsPending.record(state.alarms.count)
        armTimer()
    }

    /// Closes the viewers of ended share links, after their `session.ended`: a sink keeps the order of
    /// calls, so the event goes out first.
    func closeViewers(_ viewerKeys: [String]) {
        for viewerKey in viewerKeys {
            for sink in presence.sinks(of: viewerKey) { sink.close(.normal, reason: "share link ended") }
        }
    }

    /// The reply, with `position` read now if the rule asked for it (see `Outcome.replyPosition`).
    private func replyAfterAudience(_ outcome: Outcome) -> [(String, JSONValue)] {
        guard let target = outcome.replyPosition else { return outcome.reply }
        var reply = outcome.reply
        let position = presence.lastPosition(of: target.of, shownTo: [target.shownTo])?.json ?? .null
        if let index = reply.firstIndex(where: { $0.0 == "position" }) {
            reply[index].1 = position
        } else {
            reply.append(("position", position))
        }
        // The path behind that position, read at the same moment (`Relay+Trail`).
        reply.append(("trail", trailForReply(of: target.of, shownTo: target.shownTo)?.json ?? .null))
        return reply
    }

    /// Who receives an owner's positions and where their walk ends, as decided: taken from the state when
    /// the decision is made and given to the presence table once it is stored (the state may hold later
    /// decisions by then, not stored yet).
    struct AudienceUpdate: Sendable {
        let owner: String
        let audience: Set<String>
        /// Pauses ignored: what matters for positions from other relays (nil on a relay alone).
        let reach: Set<String>?
        let mayBeReceived: Bool
        let restriction: PositionRestriction?
        let destination: (sessionId: String, destination: Destination)?
        /// The session whose trail the presence table keeps for the owner (nil: none, the trail is dropped).
        let trailSession: String?
    }

    func audienceUpdates(owners: some Sequence<String>) -> [AudienceUpdate] {
        owners.map { owner in
            AudienceUpdate(owner: owner, audience: state.audience(of: owner),
                           reach: busIsShared ? state.audience(of: owner, ignoringPauses: true) : nil,
                           mayBeReceived: state.mayBeReceived(owner), restriction: state.positionRestriction(of: owner),
                           destination: state.destination(of: owner), trailSession: state.sessionByOwner[owner])
        }
    }

    func applyAudience(_ updates: [AudienceUpdate]) {
        for update in updates {
            presence.setAudience(of: update.owner, to: update.audience, reach: update.reach)
            presence.setOwner(update.owner, update.mayBeReceived, restriction: update.restriction)
            presence.setDestination(of: update.owner, to: update.destination)
            presence.setTrail(of: update.owner, sessionId: update.trailSession, now: clock(), limits: limits.trail)
        }
    }

    /// Tells the presence table who receives the positions of `owners` and where their walks end, as the
    /// state has it now (after a reload, or another relay's commits).
    func syncPresence(owners: some Sequence<String>) {
        applyAudience(audienceUpdates(owners: owners))
    }

    /// Decides work that no request is waiting for (`decide`, on the cache), persists and publishes its
    /// outcome. When another relay wrote first its batch is refused and the state read back (`writeRefused`):
    /// the reload re-arms the timer, so due work a refused write did not store fires again on what is stored.
    private func complete(_ decide: () -> Outcome) async {
        do {
            let outcome = try await rememberingDecisionBase { () async throws(RelayError) in
                var outcome = decide()
                guard !outcome.changes.isEmpty || !outcome.events.isEmpty else { return outcome }
                try await persistWithPushes(&outcome, now: clock())
                return outcome
            }
            guard !outcome.changes.isEmpty || !outcome.events.isEmpty else { return }
            let audience = audienceUpdates(owners: outcome.audienceChanged)
            await whenStored({ relay in
                relay.applyAudience(audience)
                relay.deliverEvents(outcome)
            }, orElse: { relay, error in
                relay.logger.error("could not store scheduled work", metadata: ["error": "\(error)"])
            })
        } catch {
            logger.error("could not store scheduled work", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Schedules

    func fireDueWork() async {
        var raised = 0
        await complete {
            let before = state.alarms.count
            let outcome = state.fireDue(now: clock(), presence: presence, shards: timerShards)
            raised = max(0, state.alarms.count - before)
            return outcome
        }
        if raised > 0 { alarmsRaised.increment(by: raised) }
        armTimer()
    }

    /// Points the one timer at the next deadline; when it fires, the due work takes its turn.
    func armTimer() {
        // A relay fires only the timers of its shards; it keeps the others' deadlines in its cache.
        let next = timerShards.isEmpty ? nil : state.nextDeadline(in: timerShards)
        guard next != timerDeadline else { return }
        timerDeadline = next
        timer?.cancel()
        timer = nil
        guard let next else { return }
        let delay = max(0, next - clock())
        let source = DispatchSource.makeTimerSource(queue: executor.queue)
        source.schedule(deadline: .now() + .milliseconds(Int(min(delay, Int64(Int32.max)))), leeway: .milliseconds(10))
        source.setEventHandler { [weak self] in self?.submit(.fireDue(then: nil)) }
        source.resume()
        timer = source
    }

    func deliver(_ message: EncodedMessage, to username: String) {
        for sink in presence.sinks(of: username) { sink.send(message) }
    }

    // MARK: Storage

    /// Runs `attempt` (decide on the cache and stage what it decided), remembering the state it decides from:
    /// what a change names only by id (a session it ends) is looked up there to find the users it concerns
    /// (`RelayState.writeScope`). Another relay's write that the decision missed is found when its batch is
    /// checked (`writeRefused`).
    func rememberingDecisionBase<T>(_ attempt: () async throws(RelayError) -> T) async throws(RelayError) -> T {
        guard busIsShared else { return try await attempt() }
        decidedFrom = state
        defer { decidedFrom = nil }
        return try await attempt()
    }

    /// How many times, and for how long, a request is decided again after a refusal (`StoreCacheBehind`) before
    /// the refusal is its answer (`decideAgain`). Only writes about the same users refuse each other, but in a
    /// burst about one user on several relays (hundreds of friends accepting one walker's invite at once) a
    /// relay may lose many times in a row, and some relay wins every round. Bounded so that a request never hangs.
    public static let writeAttempts = 100
    static let writeRetryTime = Duration.seconds(5)

    /// Before a request, when notices wait for a commit this cache lacks (another relay's, whose notice may be
    /// published after a later one's and is usually here within a few milliseconds): applying it costs
    /// microseconds where a reload reads the whole store. So this waits up to `heldCatchUpWait` for it, and
    /// reloads only when it does not come (or cannot be placed: then `handleRemoteNotices` reloads).
    func catchUpWithHeldNotices() async -> Bool {
        // Real time, not `clock()` (the rules' clock, which tests move by hand): this waits for the bus.
        let deadline = ContinuousClock.now + Self.heldCatchUpWait
        while true {
            await handleRemoteNotices(takeRemoteNotices())
            if !cluster.sequencer.isHolding { return !unstored }
            guard ContinuousClock.now < deadline else { break }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return await reloadFromStore(afterRemoteChange: true)
    }

    /// How long a request waits for a held notice's missing commit before the relay reloads.
    static let heldCatchUpWait = Duration.milliseconds(50)

    /// Reads the durable state back (after a failed write, or to catch up with other relays). When that
    /// fails (the database is down), memory may hold changes that were never stored: it is marked
    /// `unstored`, and nothing that reads or changes it runs until a later read-back succeeds (`stateIsStored`).
    @discardableResult
    ///
    /// With `giveUpAfter` (a reload nothing waits for: `catchUpAfterSilence`), a load that takes longer is left
    /// to finish unheard and the cache stays as it is, neither reloaded nor marked unstored: the mailbox waits no
    /// longer than that for a store that is slow or down, and the requests behind it fail or pass as they would.
    func reloadFromStore(afterRemoteChange: Bool = false, giveUpAfter limit: Duration? = nil) async -> Bool {
        // What was decided before is stored (or failed) first: a reload never drops a decision on its way.
        try? await writesSettled()
        // Read before the load: every commit after the load's snapshot sends its notice on this connection or a
        // later one, so a barrier on it shows every write (`catchUpBeforeRequest`).
        let generation = bus.generation
        if let limit {
            guard let stored = await load(within: limit) else {
                logger.notice("the store did not answer in time; the cache is not caught up", metadata: ["within": "\(limit)"])
                return false
            }
            return await reloaded(from: stored, generation: generation, afterRemoteChange: afterRemoteChange)
        }
        lastReadBack = clock()
        let stored: StoredState
        do {
            stored = try await store.load()
        } catch {
            if !unstored { logger.critical("storage cannot be read back; requests fail until it can", metadata: ["error": "\(error)"]) }
            unstored = true
            readBackAgainLater()
            return false
        }
        return await reloaded(from: stored, generation: generation, afterRemoteChange: afterRemoteChange)
    }

    /// The store's state, or nil when it did not come within `limit` (the load goes on unheard).
    private nonisolated func load(within limit: Duration) async -> StoredState? {
        let first = FirstAnswer<StoredState?>()
        let store = store
        return await withCheckedContinuation { continuation in
            first.wait(continuation)
            Task { first.answer(try? await store.load()) }
            Task {
                try? await Task.sleep(for: limit)
                first.answer(nil)
            }
        }
    }

    /// The rest of a reload once the store's state is read (`reloadFromStore`).
    private func reloaded(from stored: StoredState, generation: Int?, afterRemoteChange: Bool) async -> Bool {
        if unstored { logger.notice("storage is back; state read back from it") }
        unstored = false
        cluster.freshness.currentWithStore(onBus: generation)
        // Users with pauses too: their positions are recorded under their restriction, owners or not.
        let before = state.owners.union(state.pausedUsers)
        state = state.reloaded(from: stored, afterRemoteChange: afterRemoteChange)
        versions = stored.versions
        cluster.sequencer.reloaded(at: versions)
        // Alarm spool: what was delivered unstored goes into the store, then the state is read again with it.
        if !spooled.isEmpty {
            if await replaySpool() {
                let reread = await reloadFromStore(afterRemoteChange: afterRemoteChange)
                syncPresence(owners: before)
                return reread
            }
            // The failed write marked this read-back as long ago (`persist`): the next one is a second away.
            unstored = true
            lastReadBack = clock()
            readBackAgainLater()
        }
        reloads.increment()
        syncPresence(owners: before.union(state.owners).union(state.pausedUsers))
        alarmsPending.record(state.alarms.count)
        timerDeadline = nil
        armTimer()
        closeConnectionsWithoutToken()
        return !unstored
    }

    /// After a failed read-back: tries again by itself, so that timers resume without waiting for a request.
    private func readBackAgainLater() {
        executor.queue.asyncAfter(deadline: .now() + .milliseconds(Int(Self.readBackInterval))) { [weak self] in
            self?.submit(.fireDue(then: nil))
        }
    }

    /// Whether memory matches storage; after a failed read-back, tries again at most once per
    /// `readBackInterval` (each try costs a storage timeout while the database is down, and operations
    /// wait behind it), and answers false in between, so requests fail fast.
    private func stateIsStored() async -> Bool {
        guard unstored else { return true }
        guard clock() - lastReadBack >= Self.readBackInterval else { return false }
        return await reloadFromStore()
    }

    static let readBackInterval: Int64 = 1000
    static let storageUnavailable = RelayError.storage("storage is unavailable; try again shortly")
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
