import HomewardProtocol

/// What an operation on `RelayState` decided: the reply's fields, the events for other users,
/// the durable changes, and whose position audience changed.
public struct Outcome: Sendable {
    public var reply: [(String, JSONValue)] = []
    public var events: [(to: String, message: JSONValue)] = []
    public var changes: [StoreChange] = []
    /// Users whose set of position recipients may have changed.
    public var audienceChanged: Set<String> = []

    public init() {}

    mutating func send(_ type: String, to username: String, _ fields: [(String, JSONValue)]) {
        events.append((username, Message.event(type, fields)))
    }
}
