/// A Web Push subscription (RFC 8030) a user's browser handed the relay with `push.subscribe`: where
/// to POST (`endpoint`) and the keys to encrypt for (`p256dh`, `auth`, base64url as the browser gave
/// them, checked when subscribing).
public struct PushSubscription: Sendable, Equatable {
    public static let kindWebPush = "webpush"

    public let id: String
    public let username: String
    public let endpoint: String
    public let p256dh: String
    public let auth: String
    public let createdAt: Int64

    public init(id: String, username: String, endpoint: String, p256dh: String, auth: String, createdAt: Int64) {
        self.id = id
        self.username = username
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
        self.createdAt = createdAt
    }
}
