import Crypto
import Foundation

/// The signature of an operator webhook call. Each delivery carries
/// `X-Homeward-Signature: t=<unix seconds>,id=<delivery id>,v1=<hex HMAC-SHA256 of "t.id.body">` keyed with the
/// webhook secret, and the id again as `X-Homeward-Delivery`. The timestamp lets a receiver refuse an old
/// call replayed later (freshness); the id, the same on every retry of one delivery and different for
/// every other, lets it refuse one replayed within the freshness window (dedup). Both are signed with the
/// raw body, so neither can be changed or moved to another body.
public enum WebhookSignature {
    public static let headerName = "X-Homeward-Signature"
    public static let deliveryHeaderName = "X-Homeward-Delivery"

    /// What is signed: the decimal timestamp, `.`, the delivery id, `.`, then the body's exact bytes.
    public static func signedBytes(body: [UInt8], timestamp: Int64, deliveryId: String) -> [UInt8] {
        Array("\(timestamp).\(deliveryId).".utf8) + body
    }

    /// The header's value.
    public static func value(body: [UInt8], secret: String, timestamp: Int64, deliveryId: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: signedBytes(body: body, timestamp: timestamp, deliveryId: deliveryId),
                                                  using: SymmetricKey(data: Data(secret.utf8)))
        return "t=\(timestamp),id=\(deliveryId),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    /// A POST of a JSON body, signed as sent at `now`. The delivery id must not contain `,` or `=` (the
    /// relay's ids are `o_` and hex digits).
    public static func request(url: URL, body: [UInt8], secret: String, deliveryId: String, now: Date) -> PushRequest {
        precondition(!deliveryId.contains(",") && !deliveryId.contains("=") && !deliveryId.isEmpty,
                     "a delivery id is one token of the signature header")
        let timestamp = Int64(now.timeIntervalSince1970.rounded(.down))
        return PushRequest(url: url, headers: [
            ("Content-Type", "application/json"),
            (headerName, value(body: body, secret: secret, timestamp: timestamp, deliveryId: deliveryId)),
            (deliveryHeaderName, deliveryId),
        ], body: body)
    }
}
