/// How the relay pushes to users whose app is closed, and to the operator's webhook. The edge fills
/// it from the configuration and supplies the checks that need the network.
public struct PushSettings: Sendable {
    /// Subscriptions one account may hold; one more is refused with `rate_limited`.
    public var maxSubscriptionsPerUser = 10
    /// `TTL` of a push (seconds the push service keeps it for an offline device); alarms are useless
    /// after their hour of retries, so the same hour.
    public var ttl = 3600
    /// How long the worker keeps retrying before it drops a message (milliseconds).
    public var maxAge: Int64 = 3_600_000
    /// The operator webhook, when configured: every alarm, acknowledgement and cancellation goes there too.
    public var webhookURL: String?
    /// Checks a new subscription (endpoint scheme and address, keys). Runs off the relay's queue: it
    /// may resolve a host name.
    public var checkSubscription: @Sendable (_ endpoint: String, _ p256dh: String, _ auth: String) async throws(RelayError) -> Void
    /// Called after outbox entries were stored, so the worker looks again.
    public var outboxChanged: @Sendable () -> Void
    /// Sends entries that could not be stored (an alarm delivered while storage fails, `Relay+Spool`) at once,
    /// retrying from memory: they are in no outbox.
    public var sendUnstored: @Sendable ([OutboxEntry]) -> Void = { _ in }
    /// The relay's VAPID public key (base64url), sent as `vapidPublicKey` in sign-in replies.
    public var vapidPublicKey: String?

    public init(checkSubscription: @escaping @Sendable (String, String, String) async throws(RelayError) -> Void = { _, _, _ in },
                outboxChanged: @escaping @Sendable () -> Void = {}) {
        self.checkSubscription = checkSubscription
        self.outboxChanged = outboxChanged
    }
}
