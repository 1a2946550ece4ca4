/// What every `RelayStore` stores the same way, and the cache with it: the storage order of a friendship
/// pair, lists without repeats, and an alarm's recipient rows.
extension StoreChange {
    /// A friendship pair in storage order: smaller username first.
    public static func canonical(_ first: String, _ second: String) -> (String, String) {
        first < second ? (first, second) : (second, first)
    }

    /// `names` without repeats, first occurrence kept: a repeated name would break a primary key.
    public static func unique(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }
}

/// One stored recipient of an alarm (a row of `alarm_recipients`).
public struct StoredRecipient: Sendable, Equatable {
    public let username: String
    public let position: Int64
    public let deliveredAt: Int64?
    public let ackedAt: Int64?
    public let ackOrder: Int64?
}

extension Alarm {
    /// The recipient rows to store for this alarm: each recipient once, in order.
    ///
    /// An acknowledged recipient's `ackedAt` is `now`: `Alarm` keeps the order of acknowledgements but not
    /// their times, so a store keeps the time already stored for a recipient, if any (the time of the first
    /// save that saw it acknowledged).
    public func storedRecipients(now: Int64) -> [StoredRecipient] {
        let ackOrder = Dictionary(acked.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        return StoreChange.unique(recipients).enumerated().map { position, username in
            let order = ackOrder[username].map(Int64.init)
            return StoredRecipient(username: username, position: Int64(position), deliveredAt: deliveredAt[username],
                                   ackedAt: order.map { _ in now }, ackOrder: order)
        }
    }
}

/// A change named a user, session, alarm or token with a NUL in it; nothing of its batch is applied.
public struct StoreKeyError: Error, CustomStringConvertible {
    public let key: String
    public init(key: String) { self.key = key }
    public var description: String { "refusing to store a key containing NUL: \(key.debugDescription)" }
}
