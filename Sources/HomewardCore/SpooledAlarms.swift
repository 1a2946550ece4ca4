import HomewardProtocol

/// The alarm operations this relay delivered without storing them (its store failed), in the order they
/// were spooled, until the store takes them (`Relay+Spool`). A value: the relay's copy of its `AlarmSpool`.
struct SpooledAlarms {
    private(set) var records: [[StoreChange]] = []

    var isEmpty: Bool { records.isEmpty }

    /// Every spooled change in order: what one write stores when the store is back.
    var changes: [StoreChange] { records.flatMap { $0 } }

    var alarmCount: Int { Set(records.flatMap { $0.compactMap(\.spooledAlarmId) }).count }

    mutating func append(_ record: [StoreChange]) { records.append(record) }

    mutating func removeAll() { records.removeAll() }

    /// Which durable changes of an alarm operation the spool keeps: the alarm's own changes, and dropping
    /// the pushes still waiting for an alarm that is acknowledged or ended. Not the pushes and webhook calls
    /// themselves: those went out at once, and storing them later would send them twice.
    static func spooledPart(of changes: [StoreChange]) -> [StoreChange]? {
        var kept: [StoreChange] = []
        for change in changes {
            switch change {
            case .saveAlarm, .endAlarm, .cancelAlarmPushes: kept.append(change)
            case .enqueueOutbox: continue
            default: return nil  // not an alarm's change: not spooled, the operation fails as before
            }
        }
        return kept
    }
}

/// What became of an alarm operation's changes (`Relay.persistOrSpool`).
enum AlarmWrite: Sendable {
    /// Gone to `persist` like any operation's: stored, or staged for the next batch, failing with it.
    case persisted
    /// Staged for the next batch (a relay alone); when that batch fails, `ifLost` is spooled and heard instead.
    case staged(ifLost: UnstoredAlarm)
    /// Spooled: heard now, marked `"stored": false`.
    case spooled
}

/// An alarm operation as it goes out when its write fails: the outcome marked `"stored": false`, the changes
/// the spool keeps, and the pushes and webhook calls sent from memory.
struct UnstoredAlarm: Sendable {
    let outcome: Outcome
    let record: [StoreChange]
    let pushes: [OutboxEntry]
}

extension StoreChange {
    var spooledAlarmId: String? {
        switch self {
        case .saveAlarm(let alarm): alarm.id
        case .endAlarm(let id, _, _): id
        default: nil
        }
    }
}

extension Request {
    /// Requests that still get through when storage fails: raising, acknowledging and cancelling an alarm
    /// (delivered at once, spooled, stored later).
    var spoolsWhenStorageFails: Bool {
        switch self {
        case .alarmRaise, .alarmAck, .alarmCancel: true
        default: false
        }
    }
}

extension Outcome {
    /// The events that tell of an alarm, an acknowledgement or a cancellation, and the reply, marked
    /// `"stored": false`: delivered while storage failed, stored later (protocol.md, "Added and optional fields").
    mutating func markNotStored() {
        reply.append(("stored", .bool(false)))
        for index in events.indices {
            guard case .object(var members) = events[index].message,
                  let type = events[index].message["type"]?.stringValue, Self.alarmEventTypes.contains(type) else { continue }
            members.append(("stored", .bool(false)))
            events[index].message = .object(members)
        }
    }

    static let alarmEventTypes: Set<String> = ["alarm", "alarm.acked", "alarm.acknowledged", "alarm.cancelled"]
}
