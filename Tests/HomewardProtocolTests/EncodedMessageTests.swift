import HomewardProtocol
import NIOCore
import XCTest

/// A message is framed once for every recipient: the header must match RFC 6455 for each length class.
final class EncodedMessageTests: XCTestCase {
    private func framedParts(_ text: String) -> (header: [UInt8], payload: [UInt8], json: [UInt8]) {
        let message = EncodedMessage(["type": "note", "text": .string(text)])
        let framed = Array(message.framed.readableBytesView)
        let json = Array(message.bytes.readableBytesView)
        let headerLength = framed.count - json.count
        return (Array(framed[..<headerLength]), Array(framed[headerLength...]), json)
    }

    func testShortMessageHasATwoByteHeader() {
        let (header, payload, json) = framedParts("hi")
        XCTAssertEqual(header, [0x81, UInt8(json.count)])
        XCTAssertEqual(payload, json)
    }

    func testMessageOf126BytesOrMoreUsesASixteenBitLength() {
        let (header, payload, json) = framedParts(String(repeating: "a", count: 300))
        XCTAssertEqual(header, [0x81, 126, UInt8(json.count >> 8), UInt8(json.count & 0xFF)])
        XCTAssertEqual(payload, json)
    }

    func testMessageOver65535BytesUsesASixtyFourBitLength() {
        let (header, payload, json) = framedParts(String(repeating: "b", count: 70_000))
        var length: [UInt8] = []
        for shift in stride(from: 56, through: 0, by: -8) { length.append(UInt8((json.count >> shift) & 0xFF)) }
        XCTAssertEqual(header, [0x81, 127] + length)
        XCTAssertEqual(payload, json)
    }
}
