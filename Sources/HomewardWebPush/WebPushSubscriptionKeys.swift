import Crypto

/// The user agent's half of a subscription (`PushSubscription.toJSON().keys`): its P-256 public key
/// (`p256dh`, a 65-byte uncompressed point) and its 16-byte authentication secret (`auth`).
public struct WebPushSubscriptionKeys: Sendable, Equatable {
    public let p256dh: P256.KeyAgreement.PublicKey
    public let auth: [UInt8]

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.p256dh.x963Representation == rhs.p256dh.x963Representation && lhs.auth == rhs.auth
    }

    /// Validates lengths and the point itself (on the curve), so a bad subscription is refused when it
    /// is made, not when the first alarm is encrypted for it.
    public init(p256dh: [UInt8], auth: [UInt8]) throws(WebPushError) {
        guard p256dh.count == 65, p256dh.first == 0x04 else { throw .badKey("p256dh must be a 65-byte uncompressed P-256 point") }
        guard auth.count == 16 else { throw .badKey("auth must be 16 bytes") }
        do {
            self.p256dh = try P256.KeyAgreement.PublicKey(x963Representation: p256dh)
        } catch {
            throw .badKey("p256dh is not a point on P-256")
        }
        self.auth = auth
    }

    /// From the base64url strings of `PushSubscription.toJSON()`.
    public init(p256dh: String, auth: String) throws(WebPushError) {
        guard let key = Base64URL.decode(p256dh) else { throw .badKey("p256dh is not base64url") }
        guard let secret = Base64URL.decode(auth) else { throw .badKey("auth is not base64url") }
        try self.init(p256dh: key, auth: secret)
    }
}
