import HomewardProtocol

/// What an operation on `RelayState` decided: the reply's fields, the events for other users,
/// the durable changes, and whose position audience changed.
public struct Outcome: Sendable {
    /// The `ok` reply's members: a `ReplyBody`'s `fields`, or none.
    public var reply: [(String, JSONValue)] = []
    public var events: [(to: String, message: JSONValue)] = []
    public var changes: [StoreChange] = []
    /// Users whose set of position recipients may have changed.
    public var audienceChanged: Set<String> = []
    /// Alarms this operation raised (for the operator webhook, which hears of every one, recipients or not).
    public var raisedAlarms: [String] = []
    /// Share-link viewers (`ShareLink.viewerKey`) to close with 1000 once the events are sent.
    public var closeViewers: [String] = []
    /// When set, the reply's `position` is `of`'s last position shown to `shownTo` as it is once the
    /// audience changes are applied, not when the rule ran: a position that arrives while the change is
    /// being stored then reaches the new observer in the reply or by fan-out, never in neither.
    public var replyPosition: (of: String, shownTo: String)?

    public init() {}

    /// Only durable changes (bookkeeping such as alarms marked delivered).
    init(changes: [StoreChange]) {
        self.changes = changes
    }

    mutating func send(_ event: Event, to username: String) {
        events.append((username, event.json))
    }

    /// Sends the same event to several users: encoded once (see `encodedEvents`).
    mutating func send(_ event: Event, to usernames: some Sequence<String>) {
        let json = event.json
        for username in usernames { events.append((username, json)) }
    }

    /// The events encoded once per distinct message: rules send the same event to several users in a
    /// row (an alarm to each recipient), and each such run is encoded once for all of them. Only runs of
    /// neighbours are merged, so every user still gets their events in the order the rules sent them.
    func encodedEvents() -> [(message: EncodedMessage, recipients: [String])] {
        var runs: [(message: EncodedMessage, value: JSONValue, recipients: [String])] = []
        for event in events {
            if let last = runs.indices.last, runs[last].value == event.message {
                runs[last].recipients.append(event.to)
            } else {
                runs.append((EncodedMessage(event.message), event.message, [event.to]))
            }
        }
        return runs.map { ($0.message, $0.recipients) }
    }
}
