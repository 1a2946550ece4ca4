/// At most `limit` events per key (a username or a client address) within a sliding `window` of
/// milliseconds: failed logins, hellos and watches, registrations, searches, messages. A limit of 0
/// (or less) limits nothing.
///
/// Holds only the keys with an event inside the window: a key whose events have all left it is dropped when the
/// limit next counts an event (`record`) or is swept (`forgetExpired`), so a long-running relay keeps the keys of the
/// last window, not of everyone who ever failed to sign in, searched or sent a message. An event is forgotten only once
/// it is outside the window, so no sweep lets anyone past the limit sooner.
struct SlidingWindowLimit {
    private var events: [String: [Int64]] = [:]
    /// Every event counted, in the order counted: the keys whose events may all have left the window are at its front,
    /// so dropping them costs the events that expired, never a walk of the keys.
    private var counted = FIFO<(key: String, at: Int64)>()
    let limit: Int
    let window: Int64

    init(limit: Int, window: Int64) {
        self.limit = limit
        self.window = window
    }

    /// Whether `key` has had `limit` events within the window before `now`.
    func isLimited(_ key: String, now: Int64) -> Bool {
        limit > 0 && (events[key]?.filter { now - $0 < window }.count ?? 0) >= limit
    }

    /// Counts one event of `key` at `now`.
    mutating func record(_ key: String, now: Int64) {
        guard limit > 0 else { return }
        forgetExpired(now: now)
        var recent = (events[key] ?? []).filter { now - $0 < window }
        recent.append(now)
        events[key] = recent
        counted.append((key, now))
    }

    /// Forgets `key`'s events (a successful login clears its username's failures).
    mutating func reset(_ key: String) { events[key] = nil }

    /// Drops the events that left the window by `now`, and the keys left with none.
    mutating func forgetExpired(now: Int64) {
        while let first = counted.first, now - first.at >= window {
            _ = counted.popFirst()
            guard let times = events[first.key] else { continue }
            let recent = times.filter { now - $0 < window }
            events[first.key] = recent.isEmpty ? nil : recent
        }
    }

    /// How many keys have events held (those inside the window, and those not dropped yet).
    var keyCount: Int { events.count }
}
