import Crypto
import Foundation

/// The signature of an operator webhook call: `X-Homeward-Signature: sha256=<hex HMAC-SHA256 of the
/// raw body with the webhook secret>`, so a receiver can recompute it over exactly the bytes it got.
public enum WebhookSignature {
    public static let headerName = "X-Homeward-Signature"

    public static func value(body: [UInt8], secret: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Data(secret.utf8)))
        return "sha256=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    /// A POST of a JSON body, signed.
    public static func request(url: URL, body: [UInt8], secret: String) -> PushRequest {
        PushRequest(url: url, headers: [
            ("Content-Type", "application/json"),
            (headerName, value(body: body, secret: secret)),
        ], body: body)
    }
}
