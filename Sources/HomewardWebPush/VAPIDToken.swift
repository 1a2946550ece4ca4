import Crypto
import Foundation

/// A VAPID token (RFC 8292): an ES256 JWT whose `aud` is the push endpoint's origin, `exp` at most
/// 24 hours ahead and `sub` the operator's contact; and the `Authorization` header that carries it.
public struct VAPIDToken: Sendable, Equatable {
    /// The longest lifetime RFC 8292 section 2 allows.
    public static let maximumLifetime: TimeInterval = 24 * 60 * 60

    public let jwt: String
    public let expiresAt: Date

    /// Signs a token for `audience` (an origin, see `origin(of:)`) valid until `now + lifetime`.
    public init(audience: String, subject: VAPIDSubject, key: VAPIDKey, now: Date = Date(), lifetime: TimeInterval = 12 * 60 * 60) {
        precondition(lifetime > 0 && lifetime <= Self.maximumLifetime, "RFC 8292: exp is at most 24 hours ahead")
        let expiry = Int(now.timeIntervalSince1970 + lifetime)
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims = Base64URL.encode(Self.claimsJSON(audience: audience, expiry: expiry, subject: subject.description))
        let signingInput = header + "." + claims
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try key.privateKey.signature(for: Data(signingInput.utf8))
        } catch {
            preconditionFailure("ECDSA signing with a valid P-256 key cannot fail: \(error)")
        }
        // JWS ES256 (RFC 7518 section 3.4): R and S, 32 bytes each, not DER.
        jwt = signingInput + "." + Base64URL.encode(signature.rawRepresentation)
        expiresAt = Date(timeIntervalSince1970: TimeInterval(expiry))
    }

    /// `vapid t=<jwt>, k=<public key>` (RFC 8292 section 3).
    public static func authorization(jwt: String, key: VAPIDKey) -> String {
        "vapid t=\(jwt), k=\(key.publicKeyBase64URL)"
    }

    /// The origin of an endpoint (RFC 6454): scheme, host and a port other than the scheme's default.
    public static func origin(of endpoint: URL) throws(WebPushError) -> String {
        guard let scheme = endpoint.scheme?.lowercased(), scheme == "https" || scheme == "http" else {
            throw .badEndpoint("the push endpoint must be an http(s) URL")
        }
        guard var host = endpoint.host, !host.isEmpty else { throw .badEndpoint("the push endpoint has no host") }
        host = host.lowercased()
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        let defaultPort = scheme == "https" ? 443 : 80
        if let port = endpoint.port, port != defaultPort {
            return "\(scheme)://\(host):\(port)"
        }
        return "\(scheme)://\(host)"
    }

    private static func claimsJSON(audience: String, expiry: Int, subject: String) -> [UInt8] {
        // Written by hand so the claims stay in this order and carry no surprise fields; both strings
        // are escaped as JSON strings.
        Array("{\"aud\":\(jsonString(audience)),\"exp\":\(expiry),\"sub\":\(jsonString(subject))}".utf8)
    }

    private static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
