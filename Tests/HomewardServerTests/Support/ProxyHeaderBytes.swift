import NIOCore

/// PROXY protocol headers as a balancer sends them (haproxy's proxy-protocol.txt), written out byte by
/// byte here rather than taken from the relay's decoder, so that the tests check the decoder against the
/// specification and not against itself.
enum ProxyHeaderBytes {
    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    /// A v2 header: `versionCommand` 0x21 is PROXY, 0x20 LOCAL; `family` 0x11 TCP/IPv4, 0x21 TCP/IPv6, 0x00 UNSPEC.
    static func v2(versionCommand: UInt8 = 0x21, family: UInt8, body: [UInt8]) -> [UInt8] {
        signature + [versionCommand, family, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    /// PROXY over TCP/IPv4 from `source`:`sourcePort` to 127.0.0.1:8443, with `tlvs` after the addresses.
    static func v2TCP4(_ source: [UInt8], port sourcePort: UInt16 = 51234, tlvs: [UInt8] = []) -> [UInt8] {
        v2(family: 0x11, body: source + [127, 0, 0, 1] + bigEndian(sourcePort) + bigEndian(8443) + tlvs)
    }

    /// PROXY over TCP/IPv6 from `source` (16 bytes) to ::1 port 8443.
    static func v2TCP6(_ source: [UInt8], port sourcePort: UInt16 = 51234) -> [UInt8] {
        v2(family: 0x21, body: source + Array(repeating: 0, count: 15) + [1] + bigEndian(sourcePort) + bigEndian(8443))
    }

    /// LOCAL, as haproxy's health checks send it: no addresses.
    static let v2Local = v2(versionCommand: 0x20, family: 0x00, body: [])

    /// A v1 line; CRLF is added.
    static func v1(_ line: String) -> [UInt8] { Array((line + "\r\n").utf8) }

    /// 2001:db8::7, a documentation address.
    static let documentationIPv6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [7]

    private static func bigEndian(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
}

/// Writes fixed bytes as soon as the connection is up, before anything later in the pipeline (TLS) does,
/// the way a balancer puts its PROXY header before the client's bytes; then steps aside.
final class PreambleWriter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
