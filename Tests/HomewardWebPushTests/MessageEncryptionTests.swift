import Crypto
import HomewardWebPush
import XCTest

final class MessageEncryptionTests: XCTestCase {
    private func bytes(_ base64url: String) -> [UInt8] {
        guard let decoded = Base64URL.decode(base64url) else {
            XCTFail("not base64url: \(base64url)")
            return []
        }
        return decoded
    }

    func testEncryptionReproducesRFC8291AppendixAByteForByte() throws {
        let asKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(RFC8291Vector.asPrivate))
        XCTAssertEqual(Base64URL.encode(asKey.publicKey.x963Representation), RFC8291Vector.asPublic)
        let keys = try WebPushSubscriptionKeys(p256dh: RFC8291Vector.uaPublic, auth: RFC8291Vector.authSecret)

        let body = try MessageEncryption.encrypt(
            Array(RFC8291Vector.plaintext.utf8), for: keys,
            applicationServerKey: asKey, salt: bytes(RFC8291Vector.salt))

        XCTAssertEqual(Base64URL.encode(body), RFC8291Vector.body)
        XCTAssertEqual(body, bytes(RFC8291Vector.body))
    }

    func testTheRFCMessageDecryptsWithTheUserAgentKey() throws {
        let receiver = try PushReceiver(
            privateKey: P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(RFC8291Vector.uaPrivate)),
            auth: bytes(RFC8291Vector.authSecret))
        XCTAssertEqual(try receiver.decrypt(bytes(RFC8291Vector.body)), Array(RFC8291Vector.plaintext.utf8))
    }

    func testFreshMessagesRoundTripWithPaddingAndDifferEveryTime() throws {
        let receiver = PushReceiver()
        let payload = Array(#"{"type":"alarm","alarmId":"a1"}"#.utf8)
        let first = try MessageEncryption.encrypt(payload, for: receiver.keys, padding: 20)
        let second = try MessageEncryption.encrypt(payload, for: receiver.keys)
        XCTAssertEqual(try receiver.decrypt(first), payload)
        XCTAssertEqual(try receiver.decrypt(second), payload)
        XCTAssertEqual(first.count, MessageEncryption.headerSize + payload.count + 1 + 20 + 16)
        XCTAssertNotEqual(Array(first[0..<16]), Array(second[0..<16]), "a fresh salt per message")
        XCTAssertNotEqual(Array(first[21..<86]), Array(second[21..<86]), "a fresh ephemeral key per message")
        XCTAssertEqual(Array(first[16..<21]), [0, 0, 0x10, 0, 65], "rs = 4096, idlen = 65")
    }

    func testTheLargestPayloadMakesA4096ByteBodyAndOneMoreByteIsRefused() throws {
        let receiver = PushReceiver()
        let largest = [UInt8](repeating: 0x61, count: MessageEncryption.maxPlaintextSize)
        let body = try MessageEncryption.encrypt(largest, for: receiver.keys)
        XCTAssertEqual(body.count, 4096)
        XCTAssertEqual(try receiver.decrypt(body), largest)

        XCTAssertThrowsError(try MessageEncryption.encrypt(largest + [0x61], for: receiver.keys)) { error in
            XCTAssertEqual(error as? WebPushError, .payloadTooLarge(bytes: 3994, limit: 3993))
        }
        XCTAssertThrowsError(try MessageEncryption.encrypt(largest, for: receiver.keys, padding: 1))
    }

    func testSubscriptionKeysWithBadLengthsOrPointsAreRefused() throws {
        let good = PushReceiver()
        let point = [UInt8](good.privateKey.publicKey.x963Representation)
        XCTAssertNoThrow(try WebPushSubscriptionKeys(p256dh: point, auth: good.auth))
        XCTAssertThrowsError(try WebPushSubscriptionKeys(p256dh: Array(point.dropLast()), auth: good.auth))
        XCTAssertThrowsError(try WebPushSubscriptionKeys(p256dh: [UInt8](good.privateKey.publicKey.compressedRepresentation), auth: good.auth))
        XCTAssertThrowsError(try WebPushSubscriptionKeys(p256dh: point, auth: Array(good.auth.dropLast())))
        var offCurve = point
        offCurve[64] ^= 1
        XCTAssertThrowsError(try WebPushSubscriptionKeys(p256dh: offCurve, auth: good.auth)) { error in
            XCTAssertEqual(error as? WebPushError, .badKey("p256dh is not a point on P-256"))
        }
        XCTAssertThrowsError(try WebPushSubscriptionKeys(p256dh: "not base64!", auth: "BTBZMqHH6r4Tts7J_aSIgg"))
    }

    func testBase64URLRoundTripsAndRejectsOtherAlphabets() {
        let all = [UInt8](0...255)
        XCTAssertEqual(Base64URL.decode(Base64URL.encode(all)), all)
        XCTAssertFalse(Base64URL.encode(all).contains("="))
        XCTAssertNil(Base64URL.decode("ab+/"))
        XCTAssertNil(Base64URL.decode("a"))
        XCTAssertEqual(Base64URL.decode("YQ=="), [0x61])
    }
}
