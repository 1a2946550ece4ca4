import HomewardCore
import HomewardProtocol

/// One thing a relay decides on its cache, for the differential test of a cache of connected users: a signed-in
/// request, a push subscription, a sign-in's work, a share-link viewer's `watch`, an owner going offline, the
/// timers at a time.
enum ConnectedCacheStep: CustomStringConvertible {
    case request(String, Request)
    case subscribe(String, endpoint: String)
    /// `register` of a new (or taken) name.
    case register(String)
    /// A sign-in by `login`: a token issued, then the backlog, alarms marked delivered, what waited delivered and
    /// the owner back in contact.
    case signIn(String)
    /// A sign-in by `hello` with the user's latest token.
    case hello(String)
    case watch(token: String)
    case wentOffline(String)
    case due
    case advance(Int64)
    case online(String, Bool)
    /// The relay lets go of some residents (`RelayState.evict`): which ones, the run draws.
    case evict

    /// The request's case, or the step's.
    var kind: String {
        switch self {
        case .request(_, let request): String("\(request)".prefix { $0 != "(" })
        case .subscribe: "pushSubscribe"
        default: String(description.prefix { $0 != " " })
        }
    }

    var description: String {
        switch self {
        case .request(let actor, let request): "\(actor): \(request)"
        case .subscribe(let actor, let endpoint): "\(actor): push.subscribe \(endpoint)"
        case .register(let name): "register \(name)"
        case .signIn(let name): "sign-in \(name)"
        case .hello(let name): "hello \(name)"
        case .watch(let token): "watch \(token)"
        case .wentOffline(let name): "offline \(name)"
        case .due: "due"
        case .advance(let ms): "advance \(ms)"
        case .online(let name, let online): "\(name) online \(online)"
        case .evict: "evict"
        }
    }
}

/// Random steps drawn from what the whole cache holds, so that most of them do something (accept a request that
/// is pending, answer an invitation that was sent) and some are refused (a stranger, an unknown id).
struct ConnectedCacheScript {
    static let names = ["ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kai", "leo", "max", "ned",
                        "oli", "pam", "quy", "ray", "sam", "tom", "uma", "val", "wes", "xan", "yul"]
    /// Seeded, so that a failing sequence can be replayed from its seed.
    var random: SplitMix64
    var registered: [String]
    var minted: [String] = []
    /// Who acts, mostly, when set: the users connected to the relay under test, a few of many, so that most
    /// users stay not resident for long (the others act now and then, as users connecting do).
    var connected: [String]?
    /// Whether steps include evictions (`ConnectedCacheStep.evict`).
    var evicting = false

    init(seed: UInt64, registered: [String]) {
        random = SplitMix64(seed: seed)
        self.registered = registered
    }

    private mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }

    private mutating func one<C: Collection>(_ items: C) -> C.Element? { items.randomElement(using: &random) }

    /// A plausible one of `preferred`, or anyone (someone nobody registered, now and then).
    private mutating func other(_ preferred: some Collection<String>) -> String {
        if chance(75), let name = one(preferred) { return name }
        if chance(10) { return "zed" }
        return one(registered)!
    }

    private mutating func some(_ names: [String]) -> [String] {
        names.filter { _ in chance(60) }
    }

    private mutating func id(_ preferred: some Collection<String>, prefix: String) -> String {
        if chance(85), let id = one(preferred) { return id }
        return "\(prefix)unknown"
    }

    mutating func next(_ state: RelayState, now: Int64) -> ConnectedCacheStep {
        let actor = connected.flatMap { chance(85) ? one($0) : nil } ?? one(registered)!
        let friends = state.friends(of: actor)
        if evicting, chance(8) { return .evict }
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<4: return .advance(Int64.random(in: 1_000...40_000, using: &random))
        case 4..<7: return .due
        case 7..<10: return .signIn(actor)
        case 10: return .hello(actor)
        case 11..<14: return .online(actor, chance(50))
        case 14: return .wentOffline(actor)
        case 15:
            let name = chance(50) ? "new\(registered.count)" : one(registered)!
            return .register(name)
        case 16: return minted.isEmpty ? .due : .watch(token: one(minted)!)
        case 17: return .subscribe(actor, endpoint: "https://push.example/\(actor)/\(Int.random(in: 0..<3, using: &random))")
        default: return .request(actor, request(by: actor, friends: friends, state, now: now))
        }
    }

    private mutating func request(by actor: String, friends: [String], _ state: RelayState, now: Int64) -> Request {
        let ownSession = state.sessionByOwner[actor]
        let invited = Array(state.sessionsByInvitee[actor] ?? [])
        let allSessions = Array(state.sessions.keys)
        let alarmsToMe = Array(state.alarmsByRecipient[actor] ?? [])
        let myAlarms = Array(state.alarmsByOwner[actor] ?? [])
        let myMeetings = Array(state.meetingsByUser[actor] ?? [])
        let anyMeeting = Array(state.meetings.keys)
        switch Int.random(in: 0..<47, using: &random) {
        case 0, 1, 2: return .friendRequest(username: other(registered.filter { $0 != actor }))
        case 3, 4: return .friendAccept(username: other(state.incoming[actor] ?? []))
        case 5: return .friendDecline(username: other(state.incoming[actor] ?? []))
        case 6: return .friendRemove(username: other(friends + (state.outgoing[actor] ?? [])))
        case 7: return .friendList
        case 8: return .userSearch(query: one(["an", "ann", "bo", "ca", "new", "jon", "zzz"])!)
        case 9: return .userBlock(username: other(friends))
        case 10: return .userUnblock(username: other(state.blocked[actor] ?? []))
        case 11: return .userBlocks
        case 12: return .authSessions
        case 13:
            let ids = (state.tokensByUser[actor] ?? []).compactMap { state.tokens[$0]?.id }
            return .authRevoke(tokenId: id(ids, prefix: "tk_"))
        case 14: return chance(30) ? .logoutAll : .logout
        case 15, 16:
            let invite: [String]? = chance(30) ? nil : some(friends) + (chance(10) ? ["zed"] : [])
            return .sessionStart(SessionOptions(invite: invite, note: "walk", checkInBy: chance(40) ? now + 20_000 : nil,
                                                ttl: chance(30) ? 60 : nil))
        case 17: return .sessionCheckin(sessionId: id(ownSession.map { [$0] } ?? allSessions, prefix: "s_"),
                                        checkInBy: chance(50) ? now + 30_000 : nil)
        case 18: return .sessionInvite(sessionId: id(ownSession.map { [$0] } ?? allSessions, prefix: "s_"), invite: some(friends))
        case 19, 20: return .sessionAccept(sessionId: id(invited + (chance(20) ? allSessions : []), prefix: "s_"))
        case 21: return .sessionDecline(sessionId: id(invited, prefix: "s_"))
        case 22: return .sessionLeave(sessionId: id(invited, prefix: "s_"))
        case 23: return .sessionEnd(sessionId: id(ownSession.map { [$0] } ?? allSessions, prefix: "s_"))
        case 24: return .sessionList
        case 25:
            let to: [String]? = chance(50) ? nil : some(friends)
            return .alarmRaise(Request.AlarmRaise(text: "help", lat: chance(50) ? 57.7 : nil, lon: 11.9, to: to))
        case 26, 27: return .alarmAck(alarmId: id(alarmsToMe + (chance(20) ? myAlarms : []), prefix: "a_"))
        case 28: return .alarmCancel(alarmId: id(myAlarms + (chance(20) ? alarmsToMe : []), prefix: "a_"), reason: nil)
        case 29: return .alarmContacts(usernames: chance(40) ? nil : some(friends))
        case 30: return .pushUnsubscribe(subscriptionId: id((state.pushByUser[actor] ?? []) + state.pushSubscriptions.keys, prefix: "p_"))
        case 31: return .pushList
        case 32: return .shareCreate(sessionId: id(ownSession.map { [$0] } ?? allSessions, prefix: "s_"), ttl: chance(50) ? 60 : nil)
        case 33: return .shareList
        case 34: return .shareRevoke(shareId: id(state.shares.keys, prefix: "sh_"))
        case 35: return .shareAlways(with: chance(20) ? nil : some(friends))
        case 36: return .friendLocation(username: other(friends))
        case 37: return .friendTrail(username: other(friends))
        case 38: return .locationPause(from: chance(40) ? nil : other(friends), until: chance(50) ? now + 15_000 : nil)
        case 39: return .locationResume(from: chance(40) ? nil : other(friends))
        case 40: return .meetPropose(MeetingProposal(to: chance(90) ? some(friends) : ["zed"], lat: 57.7, lon: 11.9, name: "café",
                                                     time: now + Int64.random(in: 10_000...100_000, using: &random)))
        case 41: return .meetAccept(meetingId: id(myMeetings + (chance(10) ? anyMeeting : []), prefix: "m_"))
        case 42: return .meetDecline(meetingId: id(myMeetings, prefix: "m_"))
        case 43: return .meetCancel(meetingId: id(myMeetings + (chance(20) ? anyMeeting : []), prefix: "m_"))
        case 44: return .meetList
        case 45: return .msgSend(to: other(friends), text: "hi")
        default:
            // The sender's and the recipient's messages (a third party never learns an id: they are random).
            let mine = state.messages.filter { $0.value.to == actor || $0.value.from == actor }.keys
            return .msgRead(messageId: id(mine, prefix: "msg_"))
        }
    }
}
