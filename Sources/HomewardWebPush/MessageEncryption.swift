import Crypto
import Foundation

/// RFC 8291 message encryption for Web Push, in the `aes128gcm` content coding of RFC 8188: one
/// record, the last-record delimiter 0x02, optional zero padding.
///
/// The body is `salt(16) | rs(4, big-endian) | idlen(1) = 65 | as_public(65) | AES-128-GCM(record)`.
/// The key and salt are fresh for every message (reusing them would repeat a GCM key and nonce);
/// the entry point that takes them is for the RFC's worked example in the tests.
public enum MessageEncryption {
    /// The record size written in the header, as in RFC 8291's example. One record holds the whole
    /// message, so the plaintext, its delimiter, its padding and the 16-byte tag fit in it.
    public static let recordSize: UInt32 = 4096
    /// Bytes of the header: salt, record size, key id length, the 65-byte key id.
    public static let headerSize = 16 + 4 + 1 + 65
    /// The body of a push never passes 4096 bytes (what push services accept), so the plaintext is at
    /// most 4096 - header - tag - delimiter = 3993 bytes.
    public static let maxBodySize = 4096
    public static let maxPlaintextSize = maxBodySize - headerSize - 16 - 1

    /// Encrypts `plaintext` for the subscription with a fresh ephemeral key and salt.
    public static func encrypt(_ plaintext: [UInt8], for keys: WebPushSubscriptionKeys, padding: Int = 0) throws(WebPushError) -> [UInt8] {
        var salt = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = generator.next() }
        return try encrypt(plaintext, for: keys, padding: padding, applicationServerKey: P256.KeyAgreement.PrivateKey(), salt: salt)
    }

    /// Encrypts with the given ephemeral key and salt: only for known-answer tests.
    public static func encrypt(
        _ plaintext: [UInt8], for keys: WebPushSubscriptionKeys, padding: Int = 0,
        applicationServerKey: P256.KeyAgreement.PrivateKey, salt: [UInt8]
    ) throws(WebPushError) -> [UInt8] {
        precondition(salt.count == 16, "RFC 8188 salts are 16 bytes")
        precondition(padding >= 0, "padding is a count of zero bytes")
        let size = plaintext.count + padding
        guard size <= maxPlaintextSize else { throw .payloadTooLarge(bytes: size, limit: maxPlaintextSize) }

        let asPublic = applicationServerKey.publicKey.x963Representation
        let uaPublic = keys.p256dh.x963Representation
        let shared: SharedSecret
        do {
            shared = try applicationServerKey.sharedSecretFromKeyAgreement(with: keys.p256dh)
        } catch {
            throw .badKey("p256dh does not agree with a P-256 key")
        }
        // RFC 8291 section 3.4: IKM = HKDF(salt: auth, ikm: ecdh_secret, info: "WebPush: info" 0x00 ua_public as_public, L: 32)
        let keyInfo = Data("WebPush: info".utf8) + [0] + uaPublic + asPublic
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: keys.auth, sharedInfo: keyInfo, outputByteCount: 32)
        // RFC 8188 section 2.2 and 2.3: the content encryption key and the nonce from the salt.
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonceKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        let nonceBytes = nonceKey.withUnsafeBytes { [UInt8]($0) }

        // The one (last) record: plaintext, delimiter 0x02, then zeros.
        var record = plaintext
        record.append(0x02)
        record.append(contentsOf: repeatElement(0, count: padding))
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(record, using: cek, nonce: AES.GCM.Nonce(data: nonceBytes))
        } catch {
            preconditionFailure("AES-GCM with a 16-byte key and a 12-byte nonce cannot fail: \(error)")
        }

        var body = salt
        body.reserveCapacity(headerSize + record.count + 16)
        withUnsafeBytes(of: recordSize.bigEndian) { body.append(contentsOf: $0) }
        body.append(UInt8(asPublic.count))
        body.append(contentsOf: asPublic)
        body.append(contentsOf: sealed.ciphertext)
        body.append(contentsOf: sealed.tag)
        return body
    }
}
