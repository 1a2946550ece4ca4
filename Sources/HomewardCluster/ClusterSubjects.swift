/// The NATS subjects relays use. One cluster per NATS account: relays of two clusters must not share a server.
enum ClusterSubjects {
    /// Change notices of every relay (each relay's cache must refresh, whoever the events are for).
    static let changes = "hw.changes"
    /// The change notices about one user: those whose commits change their part of a cache, or with an event for them
    /// (`NoticeAddress.users`). `.` as `~`, as for positions; a user named `timers` is `hw.changes.timers`, one token
    /// fewer than a shard's subject.
    static func changes(of user: String) -> String { "hw.changes." + token(user) }
    /// The change notices that write something with a deadline of a user in one timer shard (`NoticeAddress.timerOwners`).
    static func timerChanges(of shard: Int) -> String { "hw.changes.timers.\(shard)" }
    /// Presence deltas and heartbeats of every relay (one subject, so each relay's arrive in the order it sent them).
    static let presence = "hw.presence"
    /// Requests for one relay's presence snapshot, answered by that relay. A node id has no `~`
    /// (`RelayConfiguration.isValidNodeID`), so with `.` as `~` it is one token, as a walker is.
    static func presenceSync(of node: String) -> String { "hw.presence.sync." + token(node) }

    /// The positions of one walker. A username may contain `.` (a NATS token separator) but never `~`,
    /// so `.` becomes `~` and every walker is one token.
    static func positions(of walker: String) -> String {
        "hw.pos." + token(walker)
    }

    /// Requests for a walker's last position, answered by the relay they are connected to.
    static let lastPositions = "hw.last.*"
    static func lastPosition(of walker: String) -> String { "hw.last." + token(walker) }

    /// The walker named by the last token of `subject`.
    static func walker(in subject: String) -> String {
        replacing(UInt8(ascii: "~"), with: UInt8(ascii: "."), in: String(subject.split(separator: ".").last ?? ""))
    }

    private static func token(_ walker: String) -> String { replacing(UInt8(ascii: "."), with: UInt8(ascii: "~"), in: walker) }

    /// `text` with every `old` byte (ASCII) made `new`. Byte by byte: a subject is built for every position a
    /// walker sends, and Foundation's `replacingOccurrences` costs a few NSString copies each time.
    private static func replacing(_ old: UInt8, with new: UInt8, in text: String) -> String {
        guard text.utf8.contains(old) else { return text }
        return String(decoding: text.utf8.map { $0 == old ? new : $0 }, as: UTF8.self)
    }
}
