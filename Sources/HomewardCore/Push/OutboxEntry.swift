/// One message waiting in the durable outbox: a Web Push to one subscription, or an operator webhook
/// call. Stored in the same transaction as the change that caused it (an alarm cannot be stored
/// without its pushes), removed when delivered, dropped when given up on.
public struct OutboxEntry: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case webPush = "webpush"
        case webhook
    }

    public let id: String
    public let kind: Kind
    /// The subscription for a Web Push (its endpoint and keys are copied below), nil for a webhook.
    public let subscriptionId: String?
    public let endpoint: String
    public let p256dh: String
    public let auth: String
    /// The plaintext: the WebSocket event's JSON for a push, the webhook's JSON body.
    public let payload: [UInt8]
    /// RFC 8030 `Urgency` and `Topic` (pushes only), and `TTL` in seconds.
    public let urgency: String
    public let topic: String?
    public let ttl: Int
    /// The alarm a push is about: acknowledging or cancelling it cancels the pushes still waiting.
    public let alarmId: String?
    public let createdAt: Int64
    public var nextAttemptAt: Int64
    public var attempts: Int

    public init(id: String, kind: Kind, subscriptionId: String?, endpoint: String, p256dh: String = "", auth: String = "",
                payload: [UInt8], urgency: String = "normal", topic: String? = nil, ttl: Int, alarmId: String? = nil,
                createdAt: Int64, nextAttemptAt: Int64? = nil, attempts: Int = 0) {
        self.id = id
        self.kind = kind
        self.subscriptionId = subscriptionId
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
        self.payload = payload
        self.urgency = urgency
        self.topic = topic
        self.ttl = ttl
        self.alarmId = alarmId
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt ?? createdAt
        self.attempts = attempts
    }
}

/// The outbox as the delivery worker sees it. Entries are added only through `StoreChange`s (with
/// what caused them); the worker claims what is due and records each attempt's result.
public protocol PushOutboxStore: Sendable {
    /// Claims the entries whose `nextAttemptAt` is at or before `now` and that nobody holds (at most
    /// `limit`, oldest first): in one step they are held until `now + lease`, so that no other relay on
    /// the same database (nor this one, on its next pass) sends them while this attempt is in flight.
    /// The attempt's result then reschedules (releasing the claim) or removes them; a relay that dies
    /// mid-send leaves them to be tried again when the lease ends, or at once after its restart where
    /// `releaseClaimsAfterRestart` can tell the claims were its own.
    func claimDueOutboxEntries(now: Int64, limit: Int, lease: Int64) async throws -> [OutboxEntry]
    /// At the start of a relay: releases the claims an earlier run of this same relay left behind. The
    /// SQLite store belongs to one relay, so it releases every claim; on PostgreSQL, shared by several
    /// relays, a claim may be another's, so claims are left to end with their lease.
    func releaseClaimsAfterRestart() async throws
    /// Every entry, in the order they come due, without claiming any (for inspection).
    func pendingOutboxEntries(limit: Int) async throws -> [OutboxEntry]
    /// The earliest `nextAttemptAt` of any entry, if there is one.
    func nextOutboxAttempt() async throws -> Int64?
    /// Delivered or given up: the entry is removed.
    func removeOutboxEntry(id: String) async throws
    /// To be tried again at `at`, after `attempts` attempts.
    func rescheduleOutboxEntry(id: String, at: Int64, attempts: Int) async throws
    /// How many entries wait.
    func outboxDepth() async throws -> Int
}

extension StoreChange {
    /// Whether this change puts an entry in the outbox for the delivery worker to send.
    var queuesOutboxEntry: Bool {
        if case .enqueueOutbox = self { return true }
        return false
    }
}
