@testable import HomewardServer
import HomewardTestSupport
import NIOCore
import XCTest

/// The PROXY protocol decoder as a value: bytes in, a header (or a refusal) out, no sockets.
final class ProxyHeaderDecoderTests: XCTestCase {
    private let clientHello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01]

    /// Feeds `bytes` in one read and returns the header and the bytes after it.
    private func decode(_ bytes: [UInt8]) throws -> (ProxyHeader, [UInt8]) {
        var decoder = ProxyHeaderDecoder()
        guard case .decoded(let header, let remainder) = try decoder.feed(ByteBuffer(bytes: bytes)) else {
            throw TestFailure("\(bytes.count) bytes were not a whole header")
        }
        return (header, Array(remainder.readableBytesView))
    }

    private func refusal(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> ProxyHeaderError? {
        var decoder = ProxyHeaderDecoder()
        do {
            let action = try decoder.feed(ByteBuffer(bytes: bytes))
            XCTFail("accepted or waited for more: \(action)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    private func address(_ header: ProxyHeader) -> String? { header.source?.ipAddress }

    // MARK: v1

    func testV1TCP4NamesTheClientAndPassesOnWhatFollows() throws {
        let (header, rest) = try decode(ProxyHeaderBytes.v1("PROXY TCP4 192.0.2.7 127.0.0.1 51234 8443") + clientHello)
        XCTAssertEqual(address(header), "192.0.2.7")
        XCTAssertEqual(header.source?.port, 51234)
        XCTAssertEqual(rest, clientHello)
        XCTAssertEqual(try decode(ProxyHeaderBytes.v1("PROXY TCP4 192.0.2.7 127.0.0.1 0 8443")).0.source?.port, 0)
    }

    func testV1TCP6NamesTheClientAndAnIPv4MappedOneCountsAsIPv4() throws {
        XCTAssertEqual(address(try decode(ProxyHeaderBytes.v1("PROXY TCP6 2001:db8::7 ::1 51234 8443")).0), "2001:db8::7")
        XCTAssertEqual(address(try decode(ProxyHeaderBytes.v1("PROXY TCP6 ::ffff:192.0.2.9 ::1 1 8443")).0), "192.0.2.9")
    }

    func testV1UnknownKeepsTheBalancersAddressWhateverFollowsOnTheLine() throws {
        XCTAssertEqual(try decode(ProxyHeaderBytes.v1("PROXY UNKNOWN")).0, .local)
        let (header, rest) = try decode(ProxyHeaderBytes.v1("PROXY UNKNOWN ffff::1 ffff::2 65535 65535") + clientHello)
        XCTAssertEqual(header, .local)
        XCTAssertEqual(rest, clientHello)
    }

    func testMalformedV1LinesAreRefused() {
        let lines = [
            "PROXY TCP4 192.0.2.7 127.0.0.1 51234",             // a field missing
            "PROXY TCP4 192.0.2.7 127.0.0.1 51234 8443 extra",  // one too many
            "PROXY TCP4  192.0.2.7 127.0.0.1 51234 8443",       // two spaces
            "PROXY TCP4 2001:db8::7 127.0.0.1 51234 8443",      // IPv6 under TCP4
            "PROXY TCP6 192.0.2.7 ::1 51234 8443",              // IPv4 under TCP6
            "PROXY TCP4 192.0.2.256 127.0.0.1 51234 8443",
            "PROXY TCP4 example.org 127.0.0.1 51234 8443",      // names are not addresses
            "PROXY TCP6 fe80::1%eth0 ::1 51234 8443",           // no scope ids
            "PROXY TCP4 192.0.2.7 127.0.0.1 65536 8443",
            "PROXY TCP4 192.0.2.7 127.0.0.1 +80 8443",
            "PROXY TCP4 192.0.2.7 127.0.0.1 051234 8443",      // leading zeroes, in ports
            "PROXY TCP4 192.0.2.07 127.0.0.1 51234 8443",       // and in addresses
            "PROXY TCP4 192.0.2.7 127.0.0.1 51234 ",
            "PROXY UDP4 192.0.2.7 127.0.0.1 51234 8443",
            "PROXY ",
            "PROXY TCP4 192.0.2.7\t127.0.0.1 51234 8443",
        ]
        for line in lines {
            guard case .malformedText = refusal(ProxyHeaderBytes.v1(line)) else { return XCTFail("accepted '\(line)'") }
        }
        guard case .malformedText = refusal(Array("PROXY TCP4 192.0.2.7 127.0.0.1 51234 8443\n".utf8)) else {
            return XCTFail("accepted a line ending in LF alone")
        }
    }

    func testAV1LineWithoutItsEndWithin107BytesIsTooLong() {
        let unfinished = Array("PROXY UNKNOWN ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 92)
        XCTAssertEqual(unfinished.count, 106)
        var decoder = ProxyHeaderDecoder()
        XCTAssertEqual(try decoder.feed(ByteBuffer(bytes: unfinished)), .needMoreBytes, "106 bytes may still end in CRLF")
        XCTAssertThrowsError(try decoder.feed(ByteBuffer(bytes: [UInt8(ascii: "a")]))) { error in
            XCTAssertEqual(error as? ProxyHeaderError, .tooLong(limit: 107))
        }
        // CRLF as the 106th and 107th bytes is still a header.
        XCTAssertEqual(try decode(Array(unfinished.dropLast()) + [0x0D, 0x0A]).0, .local)
    }

    // MARK: v2

    func testV2TCP4NamesTheClientSkipsTheTLVsAndPassesOnWhatFollows() throws {
        // Two TLVs: PP2_TYPE_ALPN "h2" and PP2_TYPE_AUTHORITY "relay.example".
        let tlvs: [UInt8] = [0x01, 0x00, 0x02] + Array("h2".utf8) + [0x02, 0x00, 0x0D] + Array("relay.example".utf8)
        let (header, rest) = try decode(ProxyHeaderBytes.v2TCP4([192, 0, 2, 7], port: 40000, tlvs: tlvs) + clientHello)
        XCTAssertEqual(address(header), "192.0.2.7")
        XCTAssertEqual(header.source?.port, 40000)
        XCTAssertEqual(rest, clientHello)
    }

    func testV2TCP6NamesTheClient() throws {
        let (header, rest) = try decode(ProxyHeaderBytes.v2TCP6(ProxyHeaderBytes.documentationIPv6))
        XCTAssertEqual(address(header), "2001:db8::7")
        XCTAssertEqual(rest, [])
        let mapped: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF, 192, 0, 2, 9]
        XCTAssertEqual(address(try decode(ProxyHeaderBytes.v2TCP6(mapped)).0), "192.0.2.9")
    }

    func testV2LocalUnspecAndUnixKeepTheBalancersAddress() throws {
        let (header, rest) = try decode(ProxyHeaderBytes.v2Local + clientHello)
        XCTAssertEqual(header, .local)
        XCTAssertEqual(rest, clientHello)
        // LOCAL ignores whatever family and addresses come with it.
        let localWithAddresses = ProxyHeaderBytes.v2(versionCommand: 0x20, family: 0x11, body: [192, 0, 2, 7, 127, 0, 0, 1, 0, 1, 0, 2])
        XCTAssertEqual(try decode(localWithAddresses).0, .local)
        XCTAssertEqual(try decode(ProxyHeaderBytes.v2(family: 0x00, body: [])).0, .local)
        XCTAssertEqual(try decode(ProxyHeaderBytes.v2(family: 0x31, body: Array(repeating: 0x2F, count: 216))).0, .local)
    }

    func testV2WithAnotherVersionCommandOrFamilyIsRefused() {
        XCTAssertEqual(refusal(ProxyHeaderBytes.v2(versionCommand: 0x11, family: 0x11, body: Array(repeating: 0, count: 12))),
                       .unsupportedVersionOrCommand(0x11))
        XCTAssertEqual(refusal(ProxyHeaderBytes.v2(versionCommand: 0x22, family: 0x11, body: Array(repeating: 0, count: 12))),
                       .unsupportedVersionOrCommand(0x22))
        XCTAssertEqual(refusal(ProxyHeaderBytes.v2(family: 0x12, body: Array(repeating: 0, count: 12))), .unsupportedFamily(0x12))
        XCTAssertEqual(refusal(ProxyHeaderBytes.v2(family: 0x41, body: [])), .unsupportedFamily(0x41))
    }

    func testV2TooShortForItsAddressesIsRefused() {
        XCTAssertEqual(refusal(ProxyHeaderBytes.v2(family: 0x11, body: [192, 0, 2, 7, 127, 0, 0, 1])),
                       .truncatedAddresses(family: 0x11, length: 8))
        XCTAssertEqual(refusal(ProxyHeaderBytes.v2(family: 0x21, body: Array(repeating: 1, count: 12))),
                       .truncatedAddresses(family: 0x21, length: 12))
    }

    func testAnOversizedV2HeaderIsRefusedFromItsLengthWithoutWaitingForTheBytes() {
        let fixedPart = ProxyHeaderBytes.signature + [0x21, 0x11, 0x08, 0x01]  // announces 2049 bytes of addresses and TLVs
        XCTAssertEqual(refusal(fixedPart), .tooLong(limit: ProxyHeaderDecoder.maximumBytes))
        let largest = ProxyHeaderBytes.v2TCP4([192, 0, 2, 7], tlvs: [0xEE, 0x07, 0xE1] + Array(repeating: 0, count: 2017))
        XCTAssertEqual(largest.count, ProxyHeaderDecoder.maximumBytes)
        XCTAssertEqual(try decode(largest).0.source?.ipAddress, "192.0.2.7")
    }

    // MARK: Arriving in pieces, or not at all

    func testAHeaderArrivingByteByByteIsDecodedAtItsLastByte() throws {
        for bytes in [ProxyHeaderBytes.v2TCP4([192, 0, 2, 7]), ProxyHeaderBytes.v1("PROXY TCP4 192.0.2.7 127.0.0.1 51234 8443")] {
            var decoder = ProxyHeaderDecoder()
            for byte in bytes.dropLast() {
                XCTAssertEqual(try decoder.feed(ByteBuffer(bytes: [byte])), .needMoreBytes)
            }
            guard case .decoded(let header, let rest) = try decoder.feed(ByteBuffer(bytes: [bytes.last!])) else {
                return XCTFail("not decoded at the last byte")
            }
            XCTAssertEqual(header.source?.ipAddress, "192.0.2.7")
            XCTAssertEqual(rest.readableBytes, 0)
        }
    }

    func testBytesThatCannotStartAHeaderAreRefusedAtOnce() {
        var signatureWithOneWrongByte = ProxyHeaderBytes.v2TCP4([192, 0, 2, 7])
        signatureWithOneWrongByte[7] = 0x52
        for bytes in [clientHello, Array("GET /healthz HTTP/1.1\r\n".utf8), Array("PROXX".utf8), Array("proxy ".utf8),
                      Array(signatureWithOneWrongByte.prefix(8)), [0x0D, 0x0A, 0x0D, 0x0A, 0x01]] {
            XCTAssertEqual(refusal(bytes), .missing, "\(bytes)")
        }
    }

    func testAPartialSignatureWaitsForMore() throws {
        var decoder = ProxyHeaderDecoder()
        XCTAssertEqual(try decoder.feed(ByteBuffer(bytes: ProxyHeaderBytes.signature.prefix(5))), .needMoreBytes)
        var text = ProxyHeaderDecoder()
        XCTAssertEqual(try text.feed(ByteBuffer(string: "PROX")), .needMoreBytes)
    }
}
