import Dispatch
import HomewardProtocol
import Logging
import Metrics

/// The relay's engine: serialises every operation that reads or changes durable state on one
/// queue, persists each outcome before anyone hears of it, then delivers replies and events.
///
/// Positions do not pass through here: `publish(_:from:)` is called from network threads and
/// touches only the presence table.
public final class Relay: @unchecked Sendable {
    public typealias Completion = @Sendable (Result<RelayReply, RelayError>) -> Void

    public let presence = PresenceTable()
    public let limits: RelayLimits
    private let store: any RelayStore
    private let hasher: PasswordHasher
    private let clock: @Sendable () -> Int64
    private let logger: Logger

    /// Everything below is touched only on `queue`.
    private let queue = DispatchQueue(label: "homeward.relay")
    private var state: RelayState
    private var usernameFailures: LoginThrottle
    private var addressFailures: LoginThrottle

    private var timer: DispatchSourceTimer?
    private var timerDeadline: Int64?
    /// Last-seen times not stored yet. They only tell friends when someone was last online, so they are
    /// written together, within `lastSeenWriteDelay` or at `drain`, rather than one commit (one fsync) per
    /// disconnect: after a network blip, thousands of those would queue ahead of the next alarm.
    private var unsavedLastSeen: [String: Int64] = [:]
    static let lastSeenWriteDelay: DispatchTimeInterval = .milliseconds(250)

    private let hashing: DispatchQueue
    private let hashSlots: DispatchSemaphore

    private let alarmsRaised: Counter
    private let alarmsAcknowledged: Counter
    private let alarmsPending: Gauge
    private let usersOnline: Gauge

    public init(store: any RelayStore, hasher: PasswordHasher = PasswordHasher(), limits: RelayLimits = RelayLimits(),
                safety: SafetySettings = SafetySettings(),
                clock: @escaping @Sendable () -> Int64 = Relay.systemMillis, logger: Logger = Logger(label: "homeward.relay"),
                metrics: any MetricsFactory = MetricsSystem.factory) throws {
        alarmsRaised = Counter(label: "homeward_alarms_raised_total", factory: metrics)
        alarmsAcknowledged = Counter(label: "homeward_alarms_acknowledged_total", factory: metrics)
        alarmsPending = Gauge(label: "homeward_alarms_pending", factory: metrics)
        usersOnline = Gauge(label: "homeward_authenticated_users", factory: metrics)
        self.store = store
        self.hasher = hasher
        self.limits = limits
        self.clock = clock
        self.logger = logger
        let stored = try store.load()
        self.state = RelayState(stored)
        state.safety = safety
        let startedAt = clock()
        for owner in state.sessions.values.map(\.owner) { state.ownerWentOffline(owner, at: startedAt) }
        self.usernameFailures = LoginThrottle(limit: limits.loginFailuresPerUsername, window: limits.loginFailureWindow)
        self.addressFailures = LoginThrottle(limit: limits.loginFailuresPerAddress, window: limits.loginFailureWindow)
        self.hashing = DispatchQueue(label: "homeward.passwords", attributes: .concurrent)
        self.hashSlots = DispatchSemaphore(value: max(1, limits.concurrentPasswordHashes))
        presence.seedLastSeen(stored.lastSeen)
        for owner in Set(state.sessions.values.map(\.owner)).union(state.alarms.values.map(\.owner)) {
            presence.setAudience(of: owner, to: state.audience(of: owner))
            presence.setDestination(of: owner, to: state.destination(of: owner))
        }
        alarmsPending.record(state.alarms.count)
        // Deadlines that passed while the relay was down fire now.
        queue.async { self.fireDueWork() }
    }

    @Sendable public static func systemMillis() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    // MARK: Requests

    /// Serves one request. `done` is called with the reply before any event the request causes is sent,
    /// so a connection always sees its reply first.
    public func serve(_ request: Request, auth: Authentication?, peer: String, sink: any ClientSink, done: @escaping Completion) {
        switch request {
        case .register(let username, let password, let name):
            register(username: username, password: password, name: name, previous: auth, sink: sink, done: done)
        case .login(let username, let password):
            login(username: username, password: password, peer: peer, previous: auth, sink: sink, done: done)
        case .hello(let token):
            queue.async { self.hello(token: token, previous: auth, sink: sink, done: done) }
        default:
            guard let auth else {
                done(.failure(.unauthenticated("sign in first: register, login or hello")))
                return
            }
            queue.async { self.serveSignedIn(request, auth: auth, sink: sink, done: done) }
        }
    }

    /// Relays a position to its audience; returns how many connections it was sent to.
    @discardableResult
    public func publish(_ position: Position, from username: String) -> Int {
        let fanout = presence.fanout(position, from: username, now: clock())
        if !fanout.sinks.isEmpty {
            let message = EncodedMessage(Message.position(from: username, position), positionFrom: username)
            for sink in fanout.sinks { sink.send(message) }
        }
        if let session = fanout.arrived {
            queue.async { self.complete(self.state.arrive(session, now: self.clock())) }
        }
        return fanout.sinks.count
    }

    /// Does whatever the safety extensions have due by the clock's current time.
    /// Tests with a manual clock call this after moving the clock.
    public func runDueWork() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.fireDueWork()
                continuation.resume()
            }
        }
    }

    /// Forgets a closed connection.
    public func disconnect(_ username: String, sink: any ClientSink) {
        queue.async { self.detach(username, sink) }
    }

    /// Waits until every operation submitted so far has finished and been persisted.
    public func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.saveLastSeen()
                continuation.resume()
            }
        }
    }

    // MARK: Authentication

    private func register(username: String, password: String, name: String?, previous: Authentication?,
                          sink: any ClientSink, done: @escaping Completion) {
        queue.async {
            // Checked here as well as after hashing so that a taken name costs no hashing.
            guard self.state.users[username] == nil else { return done(.failure(.conflict("username \(username) is taken"))) }
            self.hashPassword { hasher in hasher.hash(password) } then: { hash in
                let now = self.clock()
                do throws(RelayError) {
                    var outcome = try self.state.register(username: username, name: name, passwordHash: hash, now: now)
                    let token = Token.mint()
                    let auth = Authentication(username: username, tokenHash: Token.hash(token))
                    outcome.changes.append(.createToken(hash: auth.tokenHash, username: username, at: now))
                    try self.persist(outcome.changes)
                    outcome.reply = [("user", self.state.profile(username).json), ("token", .string(token))]
                    self.signIn(auth, previous: previous, sink: sink, reply: outcome.reply, done: done)
                } catch {
                    done(.failure(error))
                }
            }
        }
    }

    private func login(username: String, password: String, peer: String, previous: Authentication?,
                       sink: any ClientSink, done: @escaping Completion) {
        queue.async {
            let now = self.clock()
            guard !self.usernameFailures.isBlocked(username, now: now), !self.addressFailures.isBlocked(peer, now: now) else {
                return done(.failure(.rateLimited("too many failed logins; try again later")))
            }
            let stored: String?
            do { stored = try self.store.passwordHash(of: username) } catch {
                return done(.failure(.storage("\(error)")))
            }
            self.hashPassword { hasher -> Bool in
                guard let stored else {
                    hasher.burn(password)
                    return false
                }
                return hasher.verify(password, against: stored)
            } then: { valid in
                let now = self.clock()
                guard valid else {
                    self.usernameFailures.recordFailure(username, now: now)
                    self.addressFailures.recordFailure(peer, now: now)
                    return done(.failure(.unauthenticated("wrong username or password")))
                }
                self.usernameFailures.reset(username)
                do throws(RelayError) {
                    try self.checkConnectionLimit(username, previous: previous)
                    let token = Token.mint()
                    let auth = Authentication(username: username, tokenHash: Token.hash(token))
                    try self.persist([.createToken(hash: auth.tokenHash, username: username, at: now)])
                    let reply: [(String, JSONValue)] = [("user", self.state.profile(username).json), ("token", .string(token))]
                    self.signIn(auth, previous: previous, sink: sink, reply: reply, done: done)
                } catch {
                    done(.failure(error))
                }
            }
        }
    }

    private func hello(token: String, previous: Authentication?, sink: any ClientSink, done: @escaping Completion) {
        let hash = Token.hash(token)
        do throws(RelayError) {
            let username: String?
            do { username = try store.username(forTokenHash: hash) } catch { throw .storage("\(error)") }
            guard let username, state.users[username] != nil else { throw .unauthenticated("unknown or revoked token") }
            try checkConnectionLimit(username, previous: previous)
            signIn(Authentication(username: username, tokenHash: hash), previous: previous, sink: sink,
                   reply: [("user", state.profile(username).json)], done: done)
        } catch {
            done(.failure(error))
        }
    }

    private func checkConnectionLimit(_ username: String, previous: Authentication?) throws(RelayError) {
        let already = previous?.username == username ? 1 : 0
        guard presence.connectionCount(of: username) - already < limits.maxConnectionsPerUser else {
            throw .rateLimited("more than \(limits.maxConnectionsPerUser) connections for \(username)")
        }
    }

    /// On the queue: attaches the connection, replies, then sends what the user missed.
    private func signIn(_ auth: Authentication, previous: Authentication?, sink: any ClientSink,
                        reply: [(String, JSONValue)], done: @escaping Completion) {
        // Signing in again as the same user on the same connection changes nothing anyone can see.
        if let previous, previous.username == auth.username {
            done(.success(RelayReply(reply, auth: .authenticated(auth))))
            return
        }
        if let previous { detach(previous.username, sink) }
        let now = clock()
        let first = presence.attach(auth.username, sink, now: now)
        done(.success(RelayReply(reply, auth: .authenticated(auth))))
        for message in state.backlog(for: auth.username) { sink.send(EncodedMessage(message)) }
        let delivered = state.markAlarmsDelivered(to: auth.username, now: now)
        if !delivered.isEmpty { try? persist(delivered) }
        if first {
            announcePresence(auth.username, online: true, at: now)
            complete(state.ownerCameBack(auth.username))
        }
        usersOnline.record(presence.onlineUserCount)
    }

    private func detach(_ username: String, _ sink: any ClientSink) {
        let now = clock()
        guard presence.detach(username, sink, now: now) else { return }
        if unsavedLastSeen.isEmpty {
            queue.asyncAfter(deadline: .now() + Self.lastSeenWriteDelay) { self.saveLastSeen() }
        }
        unsavedLastSeen[username] = now
        announcePresence(username, online: false, at: now)
        usersOnline.record(presence.onlineUserCount)
        state.ownerWentOffline(username, at: now)
        armTimer()
    }

    private func saveLastSeen() {
        guard !unsavedLastSeen.isEmpty else { return }
        let changes = unsavedLastSeen.map { StoreChange.lastSeen(username: $0.key, at: $0.value) }
        unsavedLastSeen.removeAll()
        do {
            try persist(changes)
        } catch {
            logger.warning("could not store last-seen times", metadata: ["error": "\(error)"])
        }
    }

    private func announcePresence(_ username: String, online: Bool, at time: Int64) {
        let message = EncodedMessage(Message.event("presence", [
            ("username", .string(username)), ("online", .bool(online)), ("lastSeen", .int(time)),
        ]))
        for friend in state.friends(of: username) { deliver(message, to: friend) }
    }

    // MARK: Signed-in requests

    private func serveSignedIn(_ request: Request, auth: Authentication, sink: any ClientSink, done: @escaping Completion) {
        let user = auth.username
        let now = clock()
        do throws(RelayError) {
            var outcome: Outcome
            var authChange = RelayReply.AuthChange.unchanged
            switch request {
            case .logout:
                try persist([.revokeToken(hash: auth.tokenHash)])
                detach(user, sink)
                authChange = .signedOut
                outcome = Outcome()
            case .friendRequest(let target): outcome = try state.requestFriend(user, target, now: now)
            case .friendAccept(let other): outcome = try state.acceptFriend(user, other, now: now)
            case .friendDecline(let other): outcome = try state.declineFriend(user, other)
            case .friendRemove(let other): outcome = try state.removeFriend(user, other)
            case .friendList: outcome = state.friendList(user, presence: presence)
            case .userSearch(let query): outcome = state.searchUsers(query)
            case .sessionStart(let options): outcome = try state.startSession(user, options, now: now)
            case .sessionCheckin(let id, let checkInBy): outcome = try state.checkIn(user, id, checkInBy: checkInBy)
            case .sessionInvite(let id, let invite): outcome = try state.inviteToSession(user, id, invite: invite)
            case .sessionAccept(let id): outcome = try state.acceptSession(user, id, presence: presence)
            case .sessionDecline(let id): outcome = try state.declineSession(user, id)
            case .sessionLeave(let id): outcome = try state.leaveSession(user, id)
            case .sessionEnd(let id): outcome = try state.endSession(user, id, now: now)
            case .sessionList: outcome = state.listSessions(user)
            case .alarmRaise(let raise):
                outcome = try state.raiseAlarm(user, raise, presence: presence, now: now)
                alarmsRaised.increment()
            case .alarmAck(let id):
                outcome = try state.acknowledgeAlarm(user, id)
                if !outcome.changes.isEmpty { alarmsAcknowledged.increment() }
            case .alarmCancel(let id, let reason): outcome = try state.cancelAlarm(user, id, reason: reason, now: now)
            case .alarmContacts(let usernames): outcome = try state.alarmContacts(user, set: usernames)
            case .register, .login, .hello, .position, .ping:
                throw .invalid("not served here")
            }
            try persist(outcome.changes)
            // Audiences change before the reply so that a position sent right after an ok
            // already reaches the new observer.
            applyAudience(outcome)
            done(.success(RelayReply(outcome.reply, auth: authChange)))
            deliverEvents(outcome)
        } catch {
            done(.failure(error))
        }
    }

    // MARK: Delivery

    /// Sends an outcome's events; its audience changes must already be applied.
    private func deliverEvents(_ outcome: Outcome) {
        for event in outcome.events { deliver(EncodedMessage(event.message), to: event.to) }
        alarmsPending.record(state.alarms.count)
        armTimer()
    }

    private func applyAudience(_ outcome: Outcome) {
        for owner in outcome.audienceChanged {
            presence.setAudience(of: owner, to: state.audience(of: owner))
            presence.setDestination(of: owner, to: state.destination(of: owner))
        }
    }

    /// Persists and publishes an outcome that no request is waiting for.
    private func complete(_ outcome: Outcome) {
        guard !outcome.changes.isEmpty || !outcome.events.isEmpty else { return }
        do {
            try persist(outcome.changes)
            applyAudience(outcome)
            deliverEvents(outcome)
        } catch {
            logger.error("could not store scheduled work", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Schedules

    private func fireDueWork() {
        let before = state.alarms.count
        let outcome = state.fireDue(now: clock(), presence: presence)
        if state.alarms.count > before { alarmsRaised.increment(by: state.alarms.count - before) }
        complete(outcome)
        armTimer()
    }

    /// Points the one timer at the next deadline.
    private func armTimer() {
        let next = state.nextDeadline()
        guard next != timerDeadline else { return }
        timerDeadline = next
        timer?.cancel()
        timer = nil
        guard let next else { return }
        let delay = max(0, next - clock())
        let source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(deadline: .now() + .milliseconds(Int(min(delay, Int64(Int32.max)))), leeway: .milliseconds(10))
        source.setEventHandler { [weak self] in
            guard let self else { return }
            self.timerDeadline = nil
            self.fireDueWork()
        }
        source.resume()
        timer = source
    }

    private func deliver(_ message: EncodedMessage, to username: String) {
        for sink in presence.sinks(of: username) { sink.send(message) }
    }

    // MARK: Storage and hashing

    /// Makes `changes` durable. If storage fails the in-memory state may have moved ahead of
    /// it, so it is read back from storage: what is on disk is the truth.
    private func persist(_ changes: [StoreChange]) throws(RelayError) {
        guard !changes.isEmpty else { return }
        do {
            try store.apply(changes)
        } catch {
            logger.error("storage write failed; reloading state from storage", metadata: ["error": "\(error)"])
            if let stored = try? store.load() { state = RelayState(stored) }
            throw .storage("\(error)")
        }
    }

    /// Runs slow password work off the queue, bounded in concurrency, and continues on the queue.
    private func hashPassword<T: Sendable>(_ work: @escaping @Sendable (PasswordHasher) -> T,
                                           then next: @escaping @Sendable (T) -> Void) {
        let hasher = self.hasher
        hashing.async {
            self.hashSlots.wait()
            let result = work(hasher)
            self.hashSlots.signal()
            self.queue.async { next(result) }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
