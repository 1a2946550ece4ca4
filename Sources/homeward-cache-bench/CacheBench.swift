import ArgumentParser
import Foundation
import HomewardBench
import HomewardCluster
import HomewardCore
import HomewardPostgres
import HomewardProtocol
import HomewardStorage
import NIOCore

/// What another relay's commit costs a relay on a shared store: reading its whole cache again (what every
/// change notice cost before issue 13's deltas, and what a gap still costs) against applying the notice's
/// changes. One process, one store filled with a city's worth of users; the numbers go in docs/benchmarks.md.
@main
struct CacheBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homeward-cache-bench",
        abstract: "A full cache reload against applying a change notice, on a store of many users.",
        discussion: """
            Fills a fresh store (SQLite in a temporary directory, or the PostgreSQL database given with --postgres, \
            which must be empty) with --users users, --friendships friendships and some of everything else a relay \
            caches, then measures: a reload (the store's load plus rebuilding the cache), the rebuild alone, one \
            user's slice read back (the store's read of their rows plus replacing their part of the cache), and \
            applying one notice's commit (decoding it as it comes off the bus, applying it, recomputing the touched \
            owners' audiences). Build with -c release: a debug build measures the compiler, not the code.
            """)

    @Option(help: "Users in the store.")
    var users = 20_000
    @Option(help: "Friendships in the store.")
    var friendships = 40_000
    @Option(help: "Reloads measured (the median is reported, and the fastest).")
    var reloads = 7
    @Option(help: "Notices applied (each one commit of a typical mix).")
    var notices = 20_000
    @Option(help: "Slices read back (each one random user's part: the store's read plus replacing it in the cache).")
    var slices = 200
    @Option(help: "postgres://USER@HOST:PORT/DB of an empty database to measure instead of SQLite.")
    var postgres: String?
    @Option(help: "SQLite file (named homeward.sqlite) to fill and keep instead of a temporary one; one that already holds users is used as it is, not filled again.")
    var storeFile: String?
    @Option(help: "A homeward-relay binary: instead of the cache measurements, start it on the filled --store-file once per --cache mode and measure its first sign-in and its memory with --connect users signed in.")
    var startRelay: String?
    @Option(help: "Cache modes to start the relay with, in turn (whole, connected); a relay without --cache is measured as whole.")
    var cache = "whole,connected"
    @Option(help: "Times the list of --cache modes is run, alternating.")
    var rounds = 1
    @Option(help: "Users signed in (each on a WebSocket of their own, with their token) after the first sign-in.")
    var connect = 10_000
    @Option(help: "The started relay's TLS port on 127.0.0.1.")
    var port = 27443
    @Option(help: "An extra argument for the started relay (repeatable).")
    var relayArg: [String] = []
    @Option(help: "Seconds to keep the --connect users connected after the RSS is read, for a profiler or gdb to look at the relay (its PID is printed).")
    var hold = 0
    @Option(help: "After measuring with --connect users signed in, close their connections and watch the relay this many seconds (0: no): its RSS, and with --metrics-port the users it caches and has evicted (give the relay a short --relay-arg --cache-grace=SECONDS).")
    var leaveWait = 0
    @Option(help: "A loopback port for the started relay's --metrics-listen, read with curl during --leave-wait (0: off).")
    var metricsPort = 0

    /// Checked before the store is filled: the city draws distinct pairs of users until it has --friendships of
    /// them, which never ends when there are fewer pairs, and a run with nothing to measure traps on an empty median.
    func validate() throws {
        guard (2...10_000_000).contains(users) else { throw ValidationError("--users must be 2 to 10000000") }
        guard friendships >= 0, friendships <= users * (users - 1) / 2 else {
            throw ValidationError("--friendships must be 0 to \(users * (users - 1) / 2), the pairs \(users) users make")
        }
        guard reloads >= 1, notices >= 1, rounds >= 1 else { throw ValidationError("--reloads, --notices and --rounds must be at least 1") }
        guard slices >= 0, connect >= 0, hold >= 0, leaveWait >= 0 else {
            throw ValidationError("--slices, --connect, --hold and --leave-wait must be at least 0")
        }
        if let startRelay, !FileManager.default.isExecutableFile(atPath: startRelay) {
            throw ValidationError("--start-relay: \(startRelay) is not an executable (swift build -c release --product homeward-relay)")
        }
    }

    func run() async throws {
        if let startRelay { return try await measureRelayStarts(startRelay) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-cache-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any RelayStore
        let storeName: String
        if let postgres {
            store = try await PostgresStore.open(try PostgresLocation(url: postgres))
            storeName = "PostgreSQL"
        } else if let storeFile {
            store = try SQLiteStore(path: storeFile)
            storeName = "SQLite (file)"
        } else {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            store = try SQLiteStore(path: directory.appendingPathComponent("homeward.sqlite").path)
            storeName = "SQLite (file)"
        }
        var city = City(users: users, friendships: friendships)
        try await fill(store, storeName, &city)

        var state = RelayState(try await store.load())
        var reloadTimes: [Duration] = []
        var rebuildTimes: [Duration] = []
        for _ in 0..<reloads {
            let start = ContinuousClock.now
            let stored = try await store.load()
            let loaded = ContinuousClock.now
            state = state.reloaded(from: stored, afterRemoteChange: true)
            let rebuilt = ContinuousClock.now
            reloadTimes.append(rebuilt - start)
            rebuildTimes.append(rebuilt - loaded)
        }

        // One user's part read back, as after a refused write or for a user behind the store.
        var sliceTimes: [Duration] = []
        var sliceReadTimes: [Duration] = []
        for _ in 0..<slices {
            let user: Set<String> = [city.randomUser()]
            let start = ContinuousClock.now
            let slice = try await store.loadSlice(of: user)
            let read = ContinuousClock.now
            state.replaceSlice(of: user, with: slice, afterRemoteChange: true)
            let replaced = ContinuousClock.now
            sliceTimes.append(replaced - start)
            sliceReadTimes.append(read - start)
        }

        // Each notice as the committing relay publishes it; decoded, applied and its owners' audiences
        // recomputed here, as a receiving relay does (the presence table's update is left out: a reload
        // makes the same one for every owner).
        let payloads = (0..<notices).map { index in
            ClusterCodec.encode(ChangeNotice(node: "a", commits: [ChangeNotice.Commit(versions: ["walker\(index)": Int64(index + 1)], changes: city.nextCommit())]))
        }
        var audiences = 0
        let applyStart = ContinuousClock.now
        for payload in payloads {
            let notice = try ClusterCodec.decodeNotice(payload)
            for commit in notice.commits ?? [] {
                for owner in state.apply(commit.changes) { audiences &+= state.audience(of: owner).count }
            }
        }
        let applyTime = ContinuousClock.now - applyStart
        if audiences == -1 { print("") }  // keeps the work observable

        let perNotice = Self.us(applyTime) / Double(notices)
        print("""

            | \(users) users, \(friendships) friendships, \(storeName) | median | fastest |
            |---|---:|---:|
            | full reload: load + rebuild the cache (ms) | \(Self.ms(Self.median(reloadTimes))) | \(Self.ms(reloadTimes.min()!)) |
            | of which rebuilding the cache (ms) | \(Self.ms(Self.median(rebuildTimes))) | \(Self.ms(rebuildTimes.min()!)) |
            \(sliceRows(sliceTimes, sliceReadTimes))
            | applying one notice: decode + apply + audiences (µs, mean of \(notices)) | \(String(format: "%.1f", perNotice)) | |
            | one reload costs as much as applying this many notices | \(Int((Self.us(Self.median(reloadTimes)) / perNotice).rounded())) | |
            """)
        if let postgres = store as? PostgresStore { await postgres.close() }
    }

    /// Fills `store` with the city, unless it holds users already (a kept --store-file). Then, with `advancing`, the
    /// city's generator still moves on as filling would have moved it, so that the commits and users drawn next are
    /// the same (minutes at a million users: a relay's start needs no such draws).
    func fill(_ store: any RelayStore, _ storeName: String, _ city: inout City, advancing: Bool = true) async throws {
        if try await !store.searchUsers(prefix: City.username(0), limit: 1).isEmpty {
            if advancing { _ = city.initialChanges() }
            print("\(storeName) holds the city already: not filled again")
            return
        }
        let changes = city.initialChanges()
        let fillStart = ContinuousClock.now
        for batch in changes.chunked(1000) { try await store.apply(Array(batch)) }
        print("filled \(storeName) in \(Self.ms(ContinuousClock.now - fillStart)) ms: \(city.summary)")
    }

    /// Starts the relay on the filled --store-file once per mode of --cache, --rounds times, and prints the table.
    func measureRelayStarts(_ binary: String) async throws {
        guard let storeFile, URL(fileURLWithPath: storeFile).lastPathComponent == "homeward.sqlite" else {
            throw ValidationError("--start-relay needs --store-file DIR/homeward.sqlite (the relay reads that name in its --data-dir)")
        }
        guard connect < users else { throw ValidationError("--connect must be below --users (user0 signs in first)") }
        let store = try SQLiteStore(path: storeFile)
        var city = City(users: users, friendships: friendships)
        try await fill(store, "SQLite (file)", &city, advancing: false)
        try store.close()

        let limit = SystemInfo.raiseOpenFileLimit(to: 200_000)
        print("open-file limit \(limit) (the relay inherits it)")
        let env = try BenchEnvironment(threads: 2, sources: (1...4).map { "127.0.0.\($0)" })
        let start = RelayStart(binary: binary, storeFile: storeFile, port: port, connect: connect, extraArguments: relayArg, hold: hold,
                               env: env, leaveWait: leaveWait, metricsPort: metricsPort)
        let knowsCache = try start.knowsCacheOption()
        let modes = cache.split(separator: ",").map(String.init)
        var results: [RelayStart.Result] = []
        for _ in 0..<rounds {
            for mode in modes { results.append(try await start.run(mode: mode, knowsCache: knowsCache)) }
        }
        print(RelayStart.table(results, users: users))
        try await env.group.shutdownGracefully()
    }

    /// The slices' rows of the table (none when none was read).
    func sliceRows(_ times: [Duration], _ reads: [Duration]) -> String {
        guard !times.isEmpty else { return "| one user's slice: none read | | |" }
        return """
            | one user's slice: read + replace in the cache (ms, \(times.count) users) | \(Self.ms(Self.median(times))) | \(Self.ms(times.min()!)) |
            | of which the store's read (ms) | \(Self.ms(Self.median(reads))) | \(Self.ms(reads.min()!)) |
            | slowest slice (ms) | \(Self.ms(times.max()!)) | |
            """
    }

    static func ms(_ duration: Duration) -> String { String(format: "%.1f", us(duration) / 1000) }
    static func us(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    }
    static func median(_ times: [Duration]) -> Duration { times.sorted()[times.count / 2] }
}

/// A made-up city: users with friends, and some of everything else a relay caches; and a stream of the
/// commits its relays make, in a typical mix.
struct City {
    let users: Int
    let friendships: Int
    /// Seeded, so every run builds the same city.
    private var random = SplitMix64(seed: 13)
    private var serial = 0
    private var pendingRequests: [(String, String)] = []
    private var openSessions: [FollowSession] = []
    /// Owners of the open sessions: one active session per owner (the stores enforce it).
    private var walking = Set<String>()
    private var now: Int64 = 1_763_830_000_000

    init(users: Int, friendships: Int) {
        self.users = users
        self.friendships = friendships
    }

    var summary: String { "\(users) users, \(friendships) friendships, \(users / 20) sessions, \(users / 10) standing shares" }

    func name(_ index: Int) -> String { Self.username(index) }

    /// The accounts' names, passwords and tokens, known to the tool so that it can sign them in (`RelayStart`): every
    /// user has the one password (one PBKDF2 hash stored for all: hashing a million would take hours) and a token of
    /// their own.
    static func username(_ index: Int) -> String { "user\(index)" }
    static func token(_ index: Int) -> String { "token\(index)" }
    static let password = "bench-password-1"
    static let passwordHash = PasswordHasher(iterations: PasswordHasher.minimumIterations).hash(password)

    private mutating func someone() -> String { name(Int(random.next() % UInt64(users))) }

    /// Any user of the city.
    mutating func randomUser() -> String { someone() }

    private mutating func nextID(_ prefix: String) -> String {
        serial += 1
        return "\(prefix)_\(serial)"
    }

    mutating func initialChanges() -> [StoreChange] {
        var changes: [StoreChange] = []
        for index in 0..<users {
            changes.append(.createUser(UserProfile(username: name(index), name: "User \(index)"), passwordHash: Self.passwordHash, at: now))
            changes.append(.createToken(hash: Token.hash(Self.token(index)), username: name(index), at: now))
        }
        var pairs = Set<[String]>()
        while pairs.count < friendships {
            let a = someone(), b = someone()
            guard a != b else { continue }
            let (first, second) = StoreChange.canonical(a, b)
            if pairs.insert([first, second]).inserted { changes.append(.addFriendship(first, second, at: now)) }
        }
        for _ in 0..<(users / 20) {
            let session = newSession()
            changes.append(.saveSession(session))
        }
        for _ in 0..<(users / 10) { changes.append(.setStandingShare(owner: someone(), [someone(), someone()])) }
        for _ in 0..<(users / 10) { changes.append(.setAlarmContacts(owner: someone(), [someone(), someone()])) }
        for _ in 0..<(users / 20) { changes.append(.addFriendRequest(from: someone(), to: someone(), at: now)) }
        for _ in 0..<(users / 20) {
            changes.append(.saveMessage(MessageInfo(id: nextID("mg"), from: someone(), to: someone(), text: "hi", queuedAt: now)))
        }
        return changes
    }

    private mutating func newSession() -> FollowSession {
        var owner = someone()
        while !walking.insert(owner).inserted { owner = someone() }
        var session = FollowSession(id: nextID("se"), owner: owner, note: nil, startedAt: now)
        session.set(.accepted, for: someone())
        session.set(.invited, for: someone())
        openSessions.append(session)
        return session
    }

    /// One commit of the mix: friend requests and their answers, walks starting and ending, messages, a
    /// standing share changed, now and then an alarm.
    mutating func nextCommit() -> [StoreChange] {
        now += 50
        switch random.next() % 10 {
        case 0, 1:
            let pair = (someone(), someone())
            pendingRequests.append(pair)
            return [.addFriendRequest(from: pair.0, to: pair.1, at: now)]
        case 2:
            guard !pendingRequests.isEmpty else { return [.lastSeen(username: someone(), at: now)] }
            let (from, to) = pendingRequests.removeFirst()
            return [.removeFriendRequest(from: from, to: to), .addFriendship(from, to, at: now)]
        case 3:
            return [.saveSession(newSession())]
        case 4:
            guard !openSessions.isEmpty else { return [] }
            var session = openSessions.removeFirst()
            walking.remove(session.owner)
            session.set(.accepted, for: session.invitees.last ?? someone())
            return [.saveSession(session), .endSession(id: session.id, reason: "ended", at: now)]
        case 5, 6:
            let id = nextID("mg")
            return [.saveMessage(MessageInfo(id: id, from: someone(), to: someone(), text: "on my way", queuedAt: now))]
        case 7:
            return [.setStandingShare(owner: someone(), [someone(), someone(), someone()])]
        case 8:
            return [.savePause(LocationPause(owner: someone(), from: someone(), until: now + 60_000))]
        default:
            let alarm = Alarm(id: nextID("al"), owner: someone(), text: Alarm.defaultText, position: nil, createdAt: now,
                              recipients: [someone(), someone()])
            return [.saveAlarm(alarm)]
        }
    }
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
