/// `push.subscribe`: the new subscription's id.
public struct PushSubscribeReply: ReplyBody, Equatable {
    public var subscriptionId: String

    public init(subscriptionId: String) { self.subscriptionId = subscriptionId }

    public var fields: [(String, JSONValue)] { [("subscriptionId", .string(subscriptionId))] }

    public init?(json: JSONValue) {
        guard let id = json.string("subscriptionId") else { return nil }
        self.init(subscriptionId: id)
    }
}

/// One subscription as `push.list` shows it: never its keys.
public struct PushSubscriptionInfo: Sendable, Equatable {
    public var subscriptionId: String
    public var kind: String
    public var endpoint: String
    public var createdAt: Int64

    public init(subscriptionId: String, kind: String = "webpush", endpoint: String, createdAt: Int64) {
        self.subscriptionId = subscriptionId
        self.kind = kind
        self.endpoint = endpoint
        self.createdAt = createdAt
    }

    public var json: JSONValue {
        .object([("subscriptionId", .string(subscriptionId)), ("kind", .string(kind)), ("endpoint", .string(endpoint)),
                 ("createdAt", .int(createdAt))])
    }

    public init?(json: JSONValue?) {
        guard let json, let id = json.string("subscriptionId"), let endpoint = json.string("endpoint"),
              let createdAt = json.int64("createdAt") else { return nil }
        self.init(subscriptionId: id, kind: json.string("kind") ?? "webpush", endpoint: endpoint, createdAt: createdAt)
    }
}

/// `push.list`: the caller's subscriptions, oldest first.
public struct PushListReply: ReplyBody, Equatable {
    public var subscriptions: [PushSubscriptionInfo]

    public init(subscriptions: [PushSubscriptionInfo]) { self.subscriptions = subscriptions }

    public var fields: [(String, JSONValue)] { [("subscriptions", .array(subscriptions.map(\.json)))] }

    public init?(json: JSONValue) {
        let list = json.array("subscriptions").map { PushSubscriptionInfo(json: $0) }
        guard !list.contains(nil) else { return nil }
        self.init(subscriptions: list.compactMap { $0 })
    }
}
