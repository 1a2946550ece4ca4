import Crypto
@testable import HomewardServer
import HomewardCore
import HomewardWebPush
import XCTest

/// `push.subscribe` checks: https only, public addresses only (as written and as resolved), well-formed keys.
final class PushEndpointPolicyTests: XCTestCase {
    private let p256dh = Base64URL.encode(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
    private let auth = Base64URL.encode((0..<16).map { UInt8($0) })

    private func policy(http: Bool = false, privateAddresses: Bool = false, resolvesTo: [String] = ["93.184.215.14"]) -> PushEndpointPolicy {
        var policy = PushEndpointPolicy(allowHTTP: http, allowPrivate: privateAddresses)
        let addresses = resolvesTo.compactMap(IPAddressBytes.init(literal:))
        policy.resolve = { _ in addresses }
        return policy
    }

    private func refused(_ policy: PushEndpointPolicy, _ endpoint: String, p256dh: String? = nil, auth: String? = nil,
                         containing text: String, file: StaticString = #filePath, line: UInt = #line) async {
        do {
            try await policy.check(endpoint: endpoint, p256dh: p256dh ?? self.p256dh, auth: auth ?? self.auth)
            XCTFail("\(endpoint) was accepted", file: file, line: line)
        } catch {
            guard case .invalid(let message) = error else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertTrue(message.contains(text), "\(message)", file: file, line: line)
        }
    }

    func testPublicHTTPSEndpointsAreAccepted() async throws {
        try await policy().check(endpoint: "https://fcm.googleapis.com/fcm/send/abc", p256dh: p256dh, auth: auth)
        try await policy().check(endpoint: "https://8.8.8.8/push", p256dh: p256dh, auth: auth)
        try await policy().check(endpoint: "https://[2606:4700::1111]/push", p256dh: p256dh, auth: auth)
    }

    func testOnlyHTTPSUnlessAllowed() async throws {
        await refused(policy(), "http://push.example.net/x", containing: "https")
        await refused(policy(), "ftp://push.example.net/x", containing: "https")
        await refused(policy(), "push.example.net/x", containing: "endpoint")
        await refused(policy(), "https://user:pw@push.example.net/x", containing: "credentials")
        await refused(policy(), "https://push.example.net/a b", containing: "absolute URL")
        try await policy(http: true).check(endpoint: "http://push.example.net/x", p256dh: p256dh, auth: auth)
    }

    func testLoopbackPrivateAndLinkLocalAddressesAreRefusedAsWrittenAndAsResolved() async throws {
        for endpoint in ["https://127.0.0.1/x", "https://10.0.0.7/x", "https://172.16.4.4/x", "https://192.168.0.1/x",
                         "https://169.254.169.254/x", "https://100.64.0.1/x", "https://0.0.0.0/x", "https://[::1]/x",
                         "https://[fe80::1]/x", "https://[fd00::1]/x", "https://[::ffff:127.0.0.1]/x", "https://224.0.0.1/x"] {
            await refused(policy(), endpoint, containing: "loopback, private or link-local")
        }
        await refused(policy(resolvesTo: ["93.184.215.14", "127.0.0.1"]), "https://rebinding.example/x", containing: "loopback")
        await refused(policy(resolvesTo: []), "https://nowhere.invalid/x", containing: "does not resolve")
        try await policy(privateAddresses: true, resolvesTo: []).check(endpoint: "https://127.0.0.1/x", p256dh: p256dh, auth: auth)
    }

    func testKeysMustBeAnUncompressedPointAnd16ByteSecret() async {
        await refused(policy(), "https://8.8.8.8/x", p256dh: String(p256dh.dropLast(4)), containing: "p256dh")
        await refused(policy(), "https://8.8.8.8/x", auth: Base64URL.encode([1, 2, 3]), containing: "auth")
        await refused(policy(), "https://8.8.8.8/x", p256dh: "not*base64", containing: "p256dh")
    }

    func testTheSystemResolverFindsLoopbackForLocalhost() {
        XCTAssertTrue(PushEndpointPolicy.systemResolve("localhost").contains { !$0.isPublic })
        XCTAssertEqual(PushEndpointPolicy.systemResolve("127.0.0.1"), [IPAddressBytes(literal: "127.0.0.1")])
    }
}
