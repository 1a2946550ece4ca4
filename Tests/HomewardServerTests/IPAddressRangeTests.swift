import HomewardServer
import NIOCore
import XCTest

/// `--proxy-protocol-from`'s address blocks: which balancers' PROXY headers the relay trusts.
final class IPAddressRangeTests: XCTestCase {
    private func address(_ text: String) throws -> SocketAddress { try SocketAddress(ipAddress: text, port: 8443) }

    func testABlockHoldsItsAddressesAndNoOthers() throws {
        let block = try IPAddressRange(parsing: "10.0.0.0/30")
        for inside in ["10.0.0.0", "10.0.0.3"] { XCTAssertTrue(block.contains(try address(inside)), inside) }
        for outside in ["10.0.0.4", "11.0.0.1", "::1", "::a00:1"] { XCTAssertFalse(block.contains(try address(outside)), outside) }
        let odd = try IPAddressRange(parsing: "192.0.2.128/25")
        XCTAssertTrue(odd.contains(try address("192.0.2.200")))
        XCTAssertFalse(odd.contains(try address("192.0.2.127")))
    }

    func testABareAddressIsThatAddressAlone() throws {
        let one = try IPAddressRange(parsing: "127.0.0.2")
        XCTAssertEqual(one.description, "127.0.0.2/32")
        XCTAssertTrue(one.contains(try address("127.0.0.2")))
        XCTAssertFalse(one.contains(try address("127.0.0.1")))
        let six = try IPAddressRange(parsing: "2001:db8::1")
        XCTAssertEqual(six.prefixLength, 128)
        XCTAssertTrue(six.contains(try address("2001:db8::1")))
        XCTAssertFalse(six.contains(try address("2001:db8::2")))
    }

    func testIPv6BlocksAndIPv4PeersOnADualStackSocket() throws {
        XCTAssertTrue(try IPAddressRange(parsing: "2001:db8::/32").contains(try address("2001:db8:ffff::1")))
        XCTAssertFalse(try IPAddressRange(parsing: "2001:db8::/32").contains(try address("2001:db9::1")))
        XCTAssertTrue(try IPAddressRange(parsing: "10.0.0.0/8").contains(try address("::ffff:10.1.2.3")))
        XCTAssertTrue(try IPAddressRange(parsing: "0.0.0.0/0").contains(try address("203.0.113.9")))
    }

    func testAListParsesEveryItemAndRefusesEmptyOnes() throws {
        XCTAssertEqual(try IPAddressRange.parseList("10.0.0.11, 10.0.0.12/31").map(\.description), ["10.0.0.11/32", "10.0.0.12/31"])
        XCTAssertThrowsError(try IPAddressRange.parseList("10.0.0.11,,10.0.0.12"))
        XCTAssertThrowsError(try IPAddressRange.parseList("10.0.0.11,"))
    }

    func testWhatIsNotABlockIsRefusedWithTheReason() {
        let cases = [
            ("10.0.0.1/8", "bits set beyond the /8 prefix"), ("10.0.0.0/33", "0 to 32"), ("::/129", "0 to 128"),
            ("10.0.0.0/", "0 to 32"), ("10.0.0.0/-1", "0 to 32"), ("10.0.0.0/+8", "0 to 32"), ("haproxy.internal", "not an IPv4 or IPv6 address"),
            ("10.0.0", "not an IPv4 or IPv6 address"), ("fe80::1%eth0", "not an IPv4 or IPv6 address"), ("", "not an IPv4 or IPv6 address"),
        ]
        for (text, reason) in cases {
            XCTAssertThrowsError(try IPAddressRange(parsing: text), text) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(text): \(error)")
            }
        }
    }
}
