import Crypto
import Foundation

/// The application server's identity (RFC 8292): a P-256 signing key. Its public half, uncompressed
/// and base64url, is what a browser passes as `applicationServerKey` when it subscribes, and the `k`
/// of every `Authorization: vapid` header.
public struct VAPIDKey: Sendable {
    public let privateKey: P256.Signing.PrivateKey

    public init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// A new random key.
    public static func generate() -> VAPIDKey {
        VAPIDKey(privateKey: P256.Signing.PrivateKey())
    }

    /// From a PEM `PRIVATE KEY` (PKCS #8) or `EC PRIVATE KEY` (SEC 1) of a P-256 key.
    public init(pem: String) throws(WebPushError) {
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .badKey("the VAPID key is not a PEM P-256 private key")
        }
    }

    /// PKCS #8 PEM, for the key file.
    public var pem: String { privateKey.pemRepresentation }

    /// The 65-byte uncompressed public point.
    public var publicKeyBytes: [UInt8] { [UInt8](privateKey.publicKey.x963Representation) }

    /// The public key as browsers take it (`applicationServerKey`) and as `k=` carries it.
    public var publicKeyBase64URL: String { Base64URL.encode(publicKeyBytes) }
}
