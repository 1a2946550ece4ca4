import Foundation
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import Testing

/// The proof of a cache of connected users (`CacheMode.connected`): a cache that starts from the active entities
/// only (`StoredState.active()`) and admits, before each decision, the slices of the users `usersNeeded` names,
/// read from the store as it is then, decides every step exactly as a whole cache does: the same reply or error,
/// events, changes (pushes included), audiences, backlogs. And every write stays within the users admitted, so
/// that the store's check knows their versions.
///
/// A whole cache decides first and its changes are stored (SQLite, as a relay stores them); both caches restart
/// from that store after a first stretch (the connected one from its active entities), so that entities of users
/// nobody admitted yet are in it from the start.
struct ConnectedCacheDifferentialTests {
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func aConnectedCacheDecidesEveryStepAsAWholeCache(seed: UInt64) async throws {
        var run = try DifferentialRun(seed: seed)
        try await run.start()
        // A first stretch on the whole cache alone, everyone acting; then both restart from the store.
        for _ in 0..<600 { try await run.step(run.script.next(run.whole, now: run.now), compare: false) }
        // Restarts now and then, so that many decisions find most users not resident yet.
        run.script.connected = Array(ConnectedCacheScript.names.prefix(6))
        for _ in 0..<5 {
            try await run.restart()
            for _ in 0..<300 { try await run.step(run.script.next(run.whole, now: run.now), compare: true) }
        }
        #expect(run.compared > 1_000)
        #expect(run.admitted > 0)
        // Most kinds of step did something (an answer `ok`), not only refusals.
        #expect(run.done.count >= 40, "only \(run.done.sorted())")
    }

    /// The same with evictions among the steps (`RelayState.evict`, half the residents at random, the actor of the
    /// next step included): decisions stay those of a whole cache, writes stay within the users admitted, and after
    /// each eviction the cache holds exactly what a cache started then would hold once it admitted the remaining
    /// residents. Time passes in longer steps, so that timers of evicted owners fall due.
    @Test(arguments: [UInt64(11), 12, 13, 14, 15, 16])
    func evictionsLeaveEveryDecisionAsOnAWholeCache(seed: UInt64) async throws {
        var run = try DifferentialRun(seed: seed)
        try await run.start()
        for _ in 0..<400 { try await run.step(run.script.next(run.whole, now: run.now), compare: false) }
        run.script.connected = Array(ConnectedCacheScript.names.prefix(6))
        run.script.evicting = true
        for _ in 0..<3 {
            try await run.restart()
            for _ in 0..<400 { try await run.step(run.script.next(run.whole, now: run.now), compare: true) }
        }
        // About 1,000 of the 1,200 steps are decisions (the others evictions and time passing).
        #expect(run.compared > 800)
        #expect(run.evicted > 100, "evicted \(run.evicted)")
        #expect(run.readmitted > 20, "admitted again \(run.readmitted)")
        #expect(run.done.count >= 35, "only \(run.done.sorted())")
    }

    /// Every kind of step at least once, in an order in which each does something: the random runs reach most
    /// of these, not all in every run.
    @Test func aScriptedPassCoversEveryRequestKind() async throws {
        var run = try DifferentialRun(seed: 0)
        try await run.start()
        let setup: [ConnectedCacheStep] = [
            .request("ann", .friendRequest(username: "bob")), .request("bob", .friendAccept(username: "ann")),
            .request("ann", .friendRequest(username: "cat")), .request("cat", .friendAccept(username: "ann")),
            .request("dan", .friendRequest(username: "ann")), .request("eve", .friendRequest(username: "ann")),
            .request("bob", .friendRequest(username: "cat")), .request("cat", .friendAccept(username: "bob")),
            .request("fay", .friendRequest(username: "ann")), .request("ann", .userBlock(username: "fay")),
            .request("gus", .userBlock(username: "ann")),
            .request("ann", .alarmContacts(usernames: ["cat"])),
            .request("ann", .shareAlways(with: ["bob"])),
            .request("cat", .locationPause(from: nil, until: nil)),
            .request("bob", .locationPause(from: "ann", until: run.now + 50_000)),
            .request("ann", .sessionStart(SessionOptions(invite: ["bob", "cat"], note: "home", checkInBy: run.now + 40_000))),
            .request("bob", .sessionStart(SessionOptions(ttl: 120))),
            .request("ann", .shareCreate(sessionId: "s_1", ttl: 90)),
            .request("ann", .meetPropose(MeetingProposal(to: ["bob", "cat"], lat: 1, lon: 2, name: "café", time: run.now + 200_000))),
            .request("bob", .msgSend(to: "ann", text: "on my way")),
            .request("cat", .alarmRaise(Request.AlarmRaise(text: "help"))),
            .online("bob", true),
        ]
        for step in setup { try await run.step(step, compare: false) }
        try await run.restart()
        let shareToken = run.script.minted.first!
        let steps: [ConnectedCacheStep] = [
            // A viewer first, while the link's owner is not resident.
            .watch(token: shareToken),
            .signIn("ann"), .request("ann", .friendList), .request("ann", .userBlocks), .request("ann", .sessionList),
            .request("ann", .meetList), .request("ann", .shareList), .request("ann", .authSessions), .request("ann", .pushList),
            .request("ann", .userSearch(query: "ca")), .request("ann", .userSearch(query: "cat")),
            .request("ann", .friendAccept(username: "dan")), .request("ann", .friendDecline(username: "eve")),
            .request("bob", .sessionAccept(sessionId: "s_1")), .request("cat", .sessionDecline(sessionId: "s_1")),
            .request("ann", .sessionInvite(sessionId: "s_1", invite: ["cat", "dan"])),
            .request("dan", .sessionAccept(sessionId: "s_1")), .request("dan", .sessionLeave(sessionId: "s_1")),
            .request("ann", .sessionCheckin(sessionId: "s_1", checkInBy: run.now + 10_000)),
            .watch(token: shareToken),
            .request("bob", .alarmAck(alarmId: "a_6")), .request("ann", .alarmAck(alarmId: "a_6")),
            .request("ann", .alarmRaise(Request.AlarmRaise(text: "help", to: ["bob"]))),
            .request("cat", .alarmCancel(alarmId: "a_6", reason: "ok")),
            .request("bob", .meetAccept(meetingId: "m_4")), .request("cat", .meetDecline(meetingId: "m_4")),
            .request("ann", .msgRead(messageId: "msg_5")), .request("ann", .msgSend(to: "cat", text: "hi")),
            .request("ann", .friendLocation(username: "bob")), .request("bob", .friendLocation(username: "ann")),
            .request("bob", .friendTrail(username: "ann")), .request("hal", .friendTrail(username: "ann")),
            .request("ann", .locationPause(from: "cat", until: run.now + 5_000)), .request("ann", .locationResume(from: "cat")),
            .subscribe("ann", endpoint: "https://push.example/ann/0"), .request("ann", .pushUnsubscribe(subscriptionId: "p_10")),
            .request("gus", .friendRequest(username: "ann")), .request("ann", .userUnblock(username: "fay")),
            .request("ann", .friendRemove(username: "cat")), .request("ann", .userBlock(username: "bob")),
            .request("ann", .shareRevoke(shareId: "sh_3")), .request("ann", .meetCancel(meetingId: "m_4")),
            .register("ann"), .register("kim"), .hello("bob"),
            .wentOffline("bob"), .advance(70_000), .due, .advance(200_000), .due,
            .request("bob", .sessionEnd(sessionId: "s_2")), .request("ann", .authRevoke(tokenId: "tk_unknown")),
            .request("ann", .logout), .request("ann", .logoutAll),
        ]
        for step in steps { try await run.step(step, compare: true) }
        #expect(run.compared >= steps.filter { if case .advance = $0 { false } else { true } }.count)
        #expect(run.admitted > 0)
    }
}

private struct Diverged: Error {}

/// Both caches, the store the whole one's decisions are kept in, and the presence both read.
private struct DifferentialRun {
    static let tokenLifetime: Int64 = 30 * 24 * 3_600_000
    let store: SQLiteStore
    var script: ConnectedCacheScript
    var whole: RelayState
    var connected: RelayState?
    var presence = CoreTestPresence()
    var now: Int64 = 1_000_000
    var tokens: [String: String] = [:]
    /// Users whose connection closed (`wentOffline`): their next request comes after a sign-in, as on a relay.
    var offline = Set<String>()
    var compared = 0
    var admitted = 0
    /// Users evicted, and users admitted again after an eviction.
    var evicted = 0, readmitted = 0
    private var everEvicted = Set<String>()
    private var evictionRandom: SplitMix64
    /// Kinds of step compared that changed something or answered `ok`, and that were refused.
    var done = Set<String>(), refused = Set<String>()
    private var wholeIDs = CoreTestIDSequence(), connectedIDs = CoreTestIDSequence()
    private var wholePushIDs = CoreTestIDSequence(), connectedPushIDs = CoreTestIDSequence()
    private var tokenCount = 0

    init(seed: UInt64) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("connected-\(UUID().uuidString).sqlite").path
        store = try SQLiteStore(path: path)
        script = ConnectedCacheScript(seed: seed, registered: ConnectedCacheScript.names)
        evictionRandom = SplitMix64(seed: seed &+ 1_000)
        let ids = wholeIDs
        whole = RelayState(makeID: { ids.next($0) })
    }

    mutating func start() async throws {
        // The names differ from the usernames, so that a profile shown without its user's row would show.
        let users = ConnectedCacheScript.names.map { UserProfile(username: $0, name: $0.capitalized + " Q.") }
        try await store.apply(users.map { .createUser($0, passwordHash: "h", at: 1) })
        let ids = wholeIDs
        whole = RelayState(try await store.load(), makeID: { ids.next($0) })
        for name in ConnectedCacheScript.names { try await step(.signIn(name), compare: false) }
    }

    /// Both caches from the store as it is: the whole one from all of it, the connected one from its active part.
    mutating func restart() async throws {
        let stored = try await store.load()
        let (wholeIDs, connectedIDs) = (wholeIDs, connectedIDs)
        // Both make the same identifiers from here on.
        let next = wholeIDs.next("x_")
        while connectedIDs.next("x_") != next {}
        let (wholePush, connectedPush) = (wholePushIDs, connectedPushIDs)
        let pushNext = wholePush.next("x_")
        while connectedPush.next("x_") != pushNext {}
        // A restart: what is not stored (who is offline since when, throttles) starts afresh in both.
        whole = RelayState(stored, makeID: { wholeIDs.next($0) })
        connected = RelayState(connected: stored.active(), makeID: { connectedIDs.next($0) })
        #expect(connected?.users.isEmpty == true)
    }

    /// Decides `step` on the whole cache (and stores it), and when `compare`, on the connected one after admitting
    /// what it needs, expecting the same decision.
    mutating func step(_ step: ConnectedCacheStep, compare: Bool) async throws {
        switch step {
        case .advance(let ms): now += ms; return
        case .evict:
            if compare { try await evict() }
            return
        case .online(let name, let online):
            if online { presence.online.insert(name) } else { presence.online.remove(name) }
            presence.seen[name] = now
            presence.positions[name] = Position(lat: 57.7, lon: 11.9, acc: 5, ts: now)
            return
        default: break
        }
        switch step {
        case .request(let actor, _), .subscribe(let actor, _), .hello(let actor):
            if offline.contains(actor) { try await self.step(.signIn(actor), compare: compare) }
        case .wentOffline(let actor): offline.insert(actor)
        case .signIn(let actor): offline.remove(actor)
        default: break
        }
        // Every step at its own millisecond: share tokens are made of the time.
        now += 1
        var needed = Set<String>()
        if compare, var connected {
            while true {
                let needs = Self.needs(step, of: connected, now: now)
                needed.formUnion(needs)
                let missing = needs.filter { !connected.isResident($0) }
                if missing.isEmpty { break }
                connected.admit(try await store.loadSlice(of: missing), of: missing)
                admitted += missing.count
                readmitted += missing.intersection(everEvicted).count
            }
            self.connected = connected
        }
        let wholePlanner = planner(wholePushIDs), connectedPlanner = planner(connectedPushIDs)
        let decided = decide(step, on: &whole, planner: wholePlanner, candidates: nil)
        if compare, var connected {
            // `user.search` on a cache of connected users: the candidates come from the store.
            var candidates: [UserProfile]?
            if case .request(_, .userSearch(let query)) = step {
                candidates = []
                if let prefix = RelayState.searchPrefix(of: query) {
                    candidates = try await store.searchUsers(prefix: prefix, limit: RelayState.searchLimit)
                }
            }
            let partial = decide(step, on: &connected, planner: connectedPlanner, candidates: candidates)
            // The first difference ends the run: what follows it would differ because of it.
            if let difference = partial.difference(from: decided) {
                Issue.record("\(step) decided otherwise on the connected cache (needs \(needed.sorted())): \(difference)")
                throw Diverged()
            }
            let written = connected.sliceScope(of: partial.changes)
            #expect(written.isSubset(of: needed), "\(step) wrote about \(written.subtracting(needed).sorted()), not admitted")
            #expect(Set(partial.audienceOwners).isSubset(of: needed), "\(step) changed the audience of users not admitted")
            self.connected = connected
            compared += 1
            let kind = step.kind
            if partial.error == nil { done.insert(kind) } else { refused.insert(kind) }
        }
        if !decided.changes.isEmpty { try await store.apply(decided.changes) }
        if case .signIn(let name) = step {
            tokens[name] = "t_\(name)_\(tokenCount)"
            tokenCount += 1
        }
        if case .request(_, .shareCreate) = step, let token = decided.mintedToken { script.minted.append(token) }
        if case .register(let name) = step, decided.error == nil { script.registered.append(name) }
    }

    /// Evicts about half the connected cache's residents, then checks that it holds what a cache started now would
    /// hold once it admitted the remaining residents: what is left of the evicted users is what a start loads or a
    /// remaining resident's slice holds, and every remaining resident's part is untouched.
    mutating func evict() async throws {
        guard var connected, let residents = connected.resident else { return }
        let leaving = Set(residents.sorted().filter { _ in Int.random(in: 0..<2, using: &evictionRandom) == 0 })
        connected.evict(leaving)
        #expect(connected.resident == residents.subtracting(leaving))
        evicted += leaving.count
        everEvicted.formUnion(leaving)
        self.connected = connected
        let remaining = connected.resident ?? []
        var fresh = RelayState(connected: try await store.load().active())
        fresh.admit(try await store.loadSlice(of: remaining), of: remaining)
        for (owner, since) in connected.offlineOwners { fresh.ownerWentOffline(owner, at: since) }
        // (An empty list of alarm contacts a decision left is no rows in the store.)
        let (held, started) = (CacheSnapshot(connected, emptyContactsAsNone: true), CacheSnapshot(fresh, emptyContactsAsNone: true))
        if held != started {
            Issue.record("after evicting \(leaving.sorted()) of \(residents.sorted()): \(held.difference(from: started))")
            throw Diverged()
        }
    }

    private func planner(_ ids: CoreTestIDSequence) -> PushPlanner {
        var settings = PushSettings()
        settings.webhookURL = "https://desk.example/hook"
        return PushPlanner(settings: settings, tokenLifetime: Self.tokenLifetime, makeID: { ids.next($0) })
    }

    /// What the relay admits before it decides `step` (the calling contract of `usersNeeded`).
    private static func needs(_ step: ConnectedCacheStep, of state: RelayState, now: Int64) -> Set<String> {
        switch step {
        case .request(let actor, let request): state.usersNeeded(for: request, by: actor)
        case .subscribe(let actor, let endpoint):
            state.usersNeeded(for: .pushSubscribe(Request.PushSubscribe(endpoint: endpoint, p256dh: "k", auth: "a")), by: actor)
        case .register(let name): state.usersNeeded(for: .register(username: name, password: "pw", name: nil), by: name)
        // A token names its user (the relay reads which from the store, `username(forTokenHash:)`).
        case .signIn(let name), .hello(let name):
            state.usersNeeded(for: .login(username: name, password: "pw"), by: name).union(state.usersNeeded(forSignInOf: name))
        case .watch(let token): state.usersNeeded(forWatching: Token.hash(token))
        case .wentOffline: []
        case .due: state.usersNeeded(forDueAt: now)
        case .advance, .online, .evict: []
        }
    }

    private func decide(_ step: ConnectedCacheStep, on state: inout RelayState, planner: PushPlanner,
                        candidates: [UserProfile]?) -> Decision {
        var decision = Decision()
        do throws(RelayError) {
            var outcome = Outcome()
            switch step {
            case .request(let actor, let request):
                outcome = try Self.decide(request, by: actor, token: tokens[actor] ?? "none", on: &state, presence: presence,
                                          now: now, candidates: candidates)
                if case .shareCreate = request { decision.mintedToken = "token_\(now)" }
            case .subscribe(let actor, let endpoint):
                outcome = try state.subscribePush(actor, tokenHash: tokens[actor] ?? "none",
                                                  Request.PushSubscribe(endpoint: endpoint, p256dh: "k", auth: "a"), limit: 3, now: now)
            case .register(let name):
                outcome = try state.register(username: name, name: nil, passwordHash: "h", now: now)
            case .signIn(let name):
                let hash = "t_\(name)_\(tokenCount)"
                outcome.changes = state.issueToken(hash, to: name, now: now, lifetime: Self.tokenLifetime)
                decision.backlog = state.backlog(for: name)
                outcome.changes += state.markAlarmsDelivered(to: name, now: now)
                outcome.absorb(state.deliverQueued(to: name, now: now))
                outcome.absorb(state.ownerCameBack(name))
            case .hello(let name):
                outcome.changes = try state.useToken(tokens[name] ?? "none", now: now, lifetime: Self.tokenLifetime).changes
                decision.backlog = state.backlog(for: name)
            case .watch(let token):
                let (share, reply) = try state.watch(tokenHash: Token.hash(token), now: now, presence: presence)
                decision.backlog = [.object(reply.fields)] + state.viewerBacklog(share, presence: presence)
            case .wentOffline(let name):
                state.ownerWentOffline(name, at: now)
            case .due:
                outcome = state.fireDue(now: now, presence: presence)
            case .advance, .online, .evict:
                break
            }
            outcome.changes += planner.plan(outcome, state: state, presence: presence, now: now)
            decision.record(outcome, state: state)
        } catch {
            decision.error = "\(error)"
        }
        return decision
    }

    /// As `Relay.decideAndStore` calls the rules.
    private static func decide(_ request: Request, by user: String, token: String, on state: inout RelayState,
                               presence: CoreTestPresence, now: Int64, candidates: [UserProfile]?) throws(RelayError) -> Outcome {
        switch request {
        case .logout, .logoutAll: return state.logOut(user, token: token, all: request == .logoutAll)
        case .friendRequest(let target): return try state.requestFriend(user, target, now: now)
        case .friendAccept(let other): return try state.acceptFriend(user, other, now: now)
        case .friendDecline(let other): return try state.declineFriend(user, other)
        case .friendRemove(let other): return try state.removeFriend(user, other)
        case .friendList: return state.friendList(user, presence: presence)
        case .userSearch(let query): return try state.searchUsers(user, query, now: now, among: candidates)
        case .userBlock(let other): return try state.block(user, other, now: now)
        case .userUnblock(let other): return try state.unblock(user, other)
        case .userBlocks: return state.blockList(user)
        case .authSessions: return state.tokenList(user, current: token, now: now, lifetime: tokenLifetime)
        case .authRevoke(let id): return try state.revokeToken(user, id: id)
        case .sessionStart(let options): return try state.startSession(user, options, now: now)
        case .sessionCheckin(let id, let checkInBy): return try state.checkIn(user, id, checkInBy: checkInBy)
        case .sessionInvite(let id, let invite): return try state.inviteToSession(user, id, invite: invite)
        case .sessionAccept(let id): return try state.acceptSession(user, id, presence: presence)
        case .sessionDecline(let id): return try state.declineSession(user, id)
        case .sessionLeave(let id): return try state.leaveSession(user, id)
        case .sessionEnd(let id): return try state.endSession(user, id, now: now)
        case .sessionList: return state.listSessions(user)
        case .alarmRaise(let raise): return try state.raiseAlarm(user, raise, presence: presence, now: now)
        case .alarmAck(let id): return try state.acknowledgeAlarm(user, id)
        case .alarmCancel(let id, let reason): return try state.cancelAlarm(user, id, reason: reason, now: now)
        case .alarmContacts(let usernames): return try state.alarmContacts(user, set: usernames)
        case .pushUnsubscribe(let id): return try state.unsubscribePush(user, id)
        case .pushList: return state.listPush(user)
        case .shareCreate(let id, let ttl): return try state.createShare(user, id, ttl: ttl, token: "token_\(now)", now: now)
        case .shareList: return state.listShares(user, now: now)
        case .shareRevoke(let id): return try state.revokeShare(user, id)
        case .shareAlways(let with): return try state.shareAlways(user, with: with)
        case .friendLocation(let friend): return try state.friendLocation(user, friend, presence: presence, now: now)
        case .locationPause(let from, let until): return try state.pauseLocation(user, from: from, until: until)
        case .locationResume(let from): return try state.resumeLocation(user, from: from)
        case .meetPropose(let proposal): return try state.proposeMeeting(user, proposal, presence: presence, now: now)
        case .meetAccept(let id): return try state.respondToMeeting(user, id, .accepted)
        case .meetDecline(let id): return try state.respondToMeeting(user, id, .declined)
        case .meetCancel(let id): return try state.cancelMeeting(user, id)
        case .meetList: return state.listMeetings(user)
        case .msgSend(let to, let text): return try state.sendMessage(user, to: to, text: text, presence: presence, now: now)
        case .msgRead(let id): return try state.readMessage(user, id, now: now)
        case .friendTrail(let walker): return try state.friendTrail(user, walker, presence: presence, now: now)
        case .register, .login, .hello, .position, .ping, .watch, .pushSubscribe: return Outcome()
        }
    }
}

/// A decision as far as anyone can tell: what is heard, what is stored, who receives whose positions.
private struct Decision: Equatable {
    var reply: JSONValue = .null
    var events: [JSONValue] = []
    var changes: [StoreChange] = []
    var audienceOwners: [String] = []
    /// For each owner whose audience changed: who receives their positions, as the presence table is told.
    var audiences: [String] = []
    var raised: [String] = []
    var closeViewers: [String] = []
    var replyPosition: String = ""
    var backlog: [JSONValue] = []
    var error: String?
    var mintedToken: String?

    mutating func record(_ outcome: Outcome, state: RelayState) {
        reply = .object(outcome.reply)
        events = outcome.events.map { .object([("to", .string($0.to)), ("message", $0.message)]) }
        changes = outcome.changes
        audienceOwners = outcome.audienceChanged.sorted()
        audiences = audienceOwners.map { owner in
            "\(owner): \(state.audience(of: owner).sorted()) \(state.audience(of: owner, ignoringPauses: true).sorted()) "
                + "\(state.mayBeReceived(owner)) \(Self.describe(state.positionRestriction(of: owner))) "
                + "\(String(describing: state.destination(of: owner)))"
        }
        raised = outcome.raisedAlarms
        closeViewers = outcome.closeViewers
        replyPosition = outcome.replyPosition.map { "\($0.of) to \($0.shownTo)" } ?? ""
    }

    /// The parts that may differ, both ways, short (a dictionary may print in another order); nil when equal.
    func difference(from other: Decision) -> String? {
        guard self != other else { return nil }
        let mine = Mirror(reflecting: self).children, theirs = Mirror(reflecting: other).children
        var parts: [String] = []
        for (part, (a, b)) in zip(mine.map(\.label), zip(mine.map(\.value), theirs.map(\.value))) {
            let (x, y) = (String(describing: a), String(describing: b))
            if x != y { parts.append("\(part ?? "?"): \(x.prefix(600)) instead of \(y.prefix(600))") }
        }
        return parts.joined(separator: "; ")
    }

    private static func describe(_ restriction: PositionRestriction?) -> String {
        switch restriction {
        case .only(let users): "only \(users.sorted())"
        case .allBut(let users): "all but \(users.sorted())"
        case nil: "none"
        }
    }
}

private extension Outcome {
    /// Another outcome's events and changes after this one's, as the relay's sign-in sends them.
    mutating func absorb(_ other: Outcome) {
        events += other.events
        changes += other.changes
        audienceChanged.formUnion(other.audienceChanged)
        closeViewers += other.closeViewers
    }
}
