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
            await refused(policy(), endpoint, containing: "special-purpose")
        }
        await refused(policy(resolvesTo: ["93.184.215.14", "127.0.0.1"]), "https://rebinding.example/x", containing: "loopback")
        await refused(policy(resolvesTo: []), "https://nowhere.invalid/x", containing: "does not resolve")
        try await policy(privateAddresses: true, resolvesTo: []).check(endpoint: "https://127.0.0.1/x", p256dh: p256dh, auth: auth)
    }

    /// Every block of the IANA special-purpose registries, and IPv4 hidden in IPv6 (NAT64, 6to4, IPv4-compatible,
    /// mapped) or written as `inet_aton` reads it (decimal, octal, hex, short forms): the resolver is never
    /// asked, since it answers a public address here.
    func testEverySpecialPurposeAddressIsRefusedHoweverItIsWritten() async throws {
        let hosts = [
            "[64:ff9b::a00:1]", "[64:ff9b::169.254.169.254]", "[64:ff9b::7f00:1]", "[64:ff9b:1::808:808]",
            "[::7f00:1]", "[::127.0.0.1]", "[::a00:1]", "[::ffff:7f00:1]", "[::ffff:10.1.2.3]",
            "[2002:a00:1::1]", "[2002:c0a8:101::1]", "[2002:808:808::1]", "[fec0::1]", "[fe80::1]", "[fc00::1]",
            "[ff02::1]", "[::]", "[::1]", "[100::1]", "[2001::1]", "[2001:2::1]", "[2001:20::1]", "[2001:db8::1]",
            "[2620:4f:8000::1]", "[3fff::1]", "[5f00::1]",
            "192.0.0.8", "192.0.0.170", "192.0.2.1", "192.31.196.1", "192.52.193.1", "192.88.99.1", "192.175.48.1",
            "198.18.0.1", "198.51.100.1", "203.0.113.1", "240.0.0.1", "255.255.255.255", "0.1.2.3", "100.127.255.255",
            "2130706433", "0x7f.1", "017700000001", "0177.0.0.1", "127.1", "0xa000001", "0300.0250.1.1",
        ]
        for host in hosts {
            await refused(policy(resolvesTo: ["93.184.215.14"]), "https://\(host)/x", containing: "special-purpose")
        }
    }

    /// What only looks special: public IPv4 behind the NAT64 well-known prefix (a DNS64 network's view of a
    /// push service) and mapped, and global unicast next to the refused blocks.
    func testPublicAddressesInEveryFormAreAccepted() async throws {
        for host in ["[64:ff9b::808:808]", "[64:ff9b::8.8.4.4]", "[::ffff:8.8.8.8]", "[2a00:1450:4001::1]", "[2001:200::1]",
                     "[2003::1]", "[3ffe::1]", "100.128.0.1", "192.0.1.1", "198.20.0.1", "223.255.255.254", "134744072"] {
            try await policy(resolvesTo: []).check(endpoint: "https://\(host)/x", p256dh: p256dh, auth: auth)
        }
    }

    /// At send time the host is resolved again: a name that now points at a special-purpose address
    /// (DNS rebinding) is refused, one that resolves to nothing is tried later, and a public one is
    /// connected to by the address just checked.
    func testTheSendTimeTargetIsResolvedAgainAndPinned() async throws {
        let url = try XCTUnwrap(URL(string: "https://push.example.net/s/1"))
        let pinned = await policy(resolvesTo: ["93.184.215.14", "2606:4700::1111"]).target(of: url)
        XCTAssertEqual(pinned, .connect("93.184.215.14"))
        let v6 = await policy(resolvesTo: ["2606:4700::1111"]).target(of: url)
        XCTAssertEqual(v6, .connect("2606:4700:0:0:0:0:0:1111"))
        let rebound = await policy(resolvesTo: ["93.184.215.14", "10.0.0.1"]).target(of: url)
        guard case .refused(let why) = rebound else { return XCTFail("a name that rebinds to a private address is refused at send time") }
        XCTAssertTrue(why.contains("10.0.0.1"), why)
        let unresolved = await policy(resolvesTo: []).target(of: url)
        XCTAssertEqual(unresolved, .unresolved)
        let nat64 = await policy(resolvesTo: ["64:ff9b::a9fe:a9fe"]).target(of: url)
        XCTAssertEqual(nat64, .refused(
            "push.example.net is or resolves to a special-purpose address (64:ff9b:0:0:0:0:a9fe:a9fe: link-local (169.254.0.0/16))"))
        let literal = await policy(resolvesTo: []).target(of: try XCTUnwrap(URL(string: "https://[2606:4700::1111]/s/1")))
        XCTAssertEqual(literal, .connect(nil), "a literal is checked and used as written")
        let badLiteral = await policy(resolvesTo: []).target(of: try XCTUnwrap(URL(string: "https://[::ffff:10.0.0.1]/s/1")))
        guard case .refused = badLiteral else { return XCTFail("\(badLiteral)") }
        let allowed = await policy(privateAddresses: true, resolvesTo: ["127.0.0.1"]).target(of: url)
        XCTAssertEqual(allowed, .connect(nil))
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
