import Crypto
import Foundation
import HomewardWebPush

/// The user agent's side of RFC 8291, for the tests only: splits the aes128gcm header, derives the
/// same key and nonce with the subscription's private key, opens the record, strips padding.
struct PushReceiver {
    let privateKey: P256.KeyAgreement.PrivateKey
    let auth: [UInt8]

    init(privateKey: P256.KeyAgreement.PrivateKey = .init(), auth: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }) {
        self.privateKey = privateKey
        self.auth = auth
    }

    var keys: WebPushSubscriptionKeys {
        get throws { try WebPushSubscriptionKeys(p256dh: [UInt8](privateKey.publicKey.x963Representation), auth: auth) }
    }

    struct Malformed: Error {}

    func decrypt(_ body: [UInt8]) throws -> [UInt8] {
        guard body.count > 21 else { throw Malformed() }
        let salt = Array(body[0..<16])
        let idLength = Int(body[20])
        guard body.count >= 21 + idLength + 16 else { throw Malformed() }
        let asPublic = try P256.KeyAgreement.PublicKey(x963Representation: body[21..<(21 + idLength)])
        let sealed = Array(body[(21 + idLength)...])
        let shared = try privateKey.sharedSecretFromKeyAgreement(with: asPublic)
        let info = Data("WebPush: info".utf8) + [0] + privateKey.publicKey.x963Representation + asPublic.x963Representation
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: auth, sharedInfo: info, outputByteCount: 32)
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Data("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: nonce.withUnsafeBytes { Data($0) }),
            ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
        var record = [UInt8](try AES.GCM.open(box, using: cek))
        while record.last == 0 { record.removeLast() }
        guard record.last == 0x02 else { throw Malformed() }
        record.removeLast()
        return record
    }
}
