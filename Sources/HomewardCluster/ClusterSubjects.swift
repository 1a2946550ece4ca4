/// The NATS subjects relays use. One cluster per NATS account: relays of two clusters must not share a server.
enum ClusterSubjects {
    /// Change notices of every relay (each relay's cache must refresh, whoever the events are for).
    static let changes = "hw.changes"
    /// Presence digests of every relay, once a second each.
    static let presence = "hw.presence"

    /// The positions of one walker. A username may contain `.` (a NATS token separator) but never `~`,
    /// so `.` becomes `~` and every walker is one token.
    static func positions(of walker: String) -> String {
        "hw.pos." + walker.replacingOccurrences(of: ".", with: "~")
    }
}
