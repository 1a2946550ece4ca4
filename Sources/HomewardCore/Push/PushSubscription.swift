/// A Web Push subscription (RFC 8030) a user's browser handed the relay with `push.subscribe`: where
/// to POST (`endpoint`) and the keys to encrypt for (`p256dh`, `auth`, base64url as the browser gave
/// them, checked when subscribing).
///
/// A subscription belongs to the sign-in (token) that made it and ends with it; an endpoint belongs to
/// one account at a time (subscribing it from another account moves it there).
public struct PushSubscription: Sendable, Equatable {
    public static let kindWebPush = "webpush"

    public let id: String
    public let username: String
    public let endpoint: String
    public let p256dh: String
    public let auth: String
    public let createdAt: Int64
    /// The hash of the sign-in token of the connection that subscribed. nil for a subscription stored
    /// before subscriptions belonged to sign-ins: it belongs to the account's sign-ins as a whole, and
    /// ends when any of them ends (see `RelayState.endPushSubscriptions(ofToken:)`).
    public let tokenHash: String?

    public init(id: String, username: String, endpoint: String, p256dh: String, auth: String, createdAt: Int64,
                tokenHash: String?) {
        self.id = id
        self.username = username
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
        self.createdAt = createdAt
        self.tokenHash = tokenHash
    }
}
