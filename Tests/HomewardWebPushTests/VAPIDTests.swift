import Crypto
import Foundation
import HomewardWebPush
import XCTest

final class VAPIDTests: XCTestCase {
    private struct Claims: Decodable {
        let aud: String
        let exp: Int
        let sub: String
    }

    private func part(_ text: Substring) throws -> Data {
        try XCTUnwrap(Base64URL.decode(String(text))).withUnsafeBufferPointer { Data($0) }
    }

    func testTokenIsAnES256JWTThatVerifiesWithThePublicKeyAndCarriesAudExpSub() throws {
        let key = VAPIDKey.generate()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = VAPIDToken(audience: "https://push.example.net", subject: try VAPIDSubject("mailto:ops@example.org"), key: key, now: now)

        let parts = token.jwt.split(separator: ".", omittingEmptySubsequences: false)
        XCTAssertEqual(parts.count, 3)
        let header = try JSONSerialization.jsonObject(with: part(parts[0])) as? [String: String]
        XCTAssertEqual(header, ["typ": "JWT", "alg": "ES256"])
        let claims = try JSONDecoder().decode(Claims.self, from: part(parts[1]))
        XCTAssertEqual(claims.aud, "https://push.example.net")
        XCTAssertEqual(claims.sub, "mailto:ops@example.org")
        XCTAssertGreaterThan(claims.exp, 1_800_000_000)
        XCTAssertLessThanOrEqual(claims.exp, 1_800_000_000 + 24 * 3600)

        let signature = try P256.Signing.ECDSASignature(rawRepresentation: part(parts[2]))
        let publicKey = try P256.Signing.PublicKey(x963Representation: XCTUnwrap(Base64URL.decode(key.publicKeyBase64URL)))
        XCTAssertTrue(publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        XCTAssertFalse(P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }

    func testAuthorizationHeaderNamesTokenAndKey() {
        let key = VAPIDKey.generate()
        XCTAssertEqual(VAPIDToken.authorization(jwt: "a.b.c", key: key), "vapid t=a.b.c, k=\(key.publicKeyBase64URL)")
        XCTAssertEqual(key.publicKeyBytes.count, 65)
        XCTAssertEqual(key.publicKeyBytes.first, 0x04)
    }

    func testAudienceIsTheEndpointOriginWithoutPathOrDefaultPort() throws {
        func origin(_ text: String) throws -> String { try VAPIDToken.origin(of: XCTUnwrap(URL(string: text))) }
        XCTAssertEqual(try origin("https://fcm.googleapis.com/fcm/send/abc:def"), "https://fcm.googleapis.com")
        XCTAssertEqual(try origin("https://Push.Example.net:443/x"), "https://push.example.net")
        XCTAssertEqual(try origin("https://push.example.net:8443/x"), "https://push.example.net:8443")
        XCTAssertEqual(try origin("http://127.0.0.1:9000/push/1"), "http://127.0.0.1:9000")
        XCTAssertThrowsError(try origin("ftp://example.net/x"))
        XCTAssertThrowsError(try origin("https:///nohost"))
    }

    func testPEMRoundTripKeepsTheKeyAndGarbageIsRefused() throws {
        let key = VAPIDKey.generate()
        XCTAssertEqual(try VAPIDKey(pem: key.pem).publicKeyBase64URL, key.publicKeyBase64URL)
        XCTAssertThrowsError(try VAPIDKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
    }

    func testSubjectMustBeMailtoOrHTTPS() {
        XCTAssertNoThrow(try VAPIDSubject("mailto:ops@example.org"))
        XCTAssertNoThrow(try VAPIDSubject("https://example.org/contact"))
        for bad in ["ops@example.org", "mailto:", "mailto:nobody", "mailto:a@", "http://example.org", "https://", "mailto:a b@c"] {
            XCTAssertThrowsError(try VAPIDSubject(bad), bad)
        }
    }

    func testWebPushRequestCarriesRFC8030HeadersAndADecryptableBody() throws {
        let receiver = PushReceiver()
        let key = VAPIDKey.generate()
        let request = try PushRequest.webPush(
            endpoint: XCTUnwrap(URL(string: "https://push.example.net/s/1")), keys: receiver.keys,
            payload: Array("hello".utf8), options: PushOptions(ttl: 3600, urgency: .high, topic: "alarm-a1"),
            vapidKey: key, subject: VAPIDSubject("mailto:ops@example.org"))
        XCTAssertEqual(request.header("content-encoding"), "aes128gcm")
        XCTAssertEqual(request.header("TTL"), "3600")
        XCTAssertEqual(request.header("Urgency"), "high")
        XCTAssertEqual(request.header("Topic"), "alarm-a1")
        XCTAssertTrue(request.header("Authorization")?.hasPrefix("vapid t=") ?? false)
        XCTAssertTrue(request.header("Authorization")?.hasSuffix(", k=\(key.publicKeyBase64URL)") ?? false)
        XCTAssertEqual(try receiver.decrypt(request.body), Array("hello".utf8))
    }

    func testPushOptionsRefuseBadTopicsAndNegativeTTL() {
        XCTAssertThrowsError(try PushOptions(ttl: -1))
        XCTAssertThrowsError(try PushOptions(ttl: 60, topic: String(repeating: "a", count: 33)))
        XCTAssertThrowsError(try PushOptions(ttl: 60, topic: "has space"))
        XCTAssertThrowsError(try PushOptions(ttl: 60, topic: ""))
        XCTAssertNoThrow(try PushOptions(ttl: 0, topic: String(repeating: "a", count: 32)))
    }
}
