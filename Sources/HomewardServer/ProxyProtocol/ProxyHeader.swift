import NIOCore

/// What a load balancer said about a connection in its PROXY protocol header (v1 text or v2 binary,
/// haproxy's proxy-protocol.txt): where the client it forwards is.
struct ProxyHeader: Equatable, Sendable {
    /// The client's address and port as the balancer accepted them; nil when the balancer speaks for
    /// itself (v2 `LOCAL`, as in its health checks; v1 `UNKNOWN`; a family without an IP address), and
    /// the connection's own address stands.
    var source: SocketAddress?

    static let local = ProxyHeader(source: nil)
}

/// Why the bytes a trusted balancer sent are not a PROXY header the relay accepts; the connection is closed.
enum ProxyHeaderError: Error, Equatable, CustomStringConvertible {
    /// Neither the v1 `PROXY ` prefix nor the v2 signature: a client speaking TLS straight to the relay
    /// from a trusted address, or a balancer not configured to send the header.
    case missing
    /// Longer than `ProxyHeaderDecoder.maximumBytes` (a v1 line without its CRLF, or a v2 length field).
    case tooLong(limit: Int)
    /// A v1 line that does not follow `PROXY TCP4|TCP6|UNKNOWN SRC DST SPORT DPORT\r\n`.
    case malformedText(String)
    /// v2 with a version other than 2, or a command other than LOCAL and PROXY.
    case unsupportedVersionOrCommand(UInt8)
    /// v2 with an address family or transport the relay cannot stand for a TCP connection (UDP, unknown values).
    case unsupportedFamily(UInt8)
    /// v2 whose length is too short for the addresses of its family.
    case truncatedAddresses(family: UInt8, length: Int)

    var description: String {
        switch self {
        case .missing: "no PROXY protocol header (the connection must start with one)"
        case .tooLong(let limit): "PROXY protocol header longer than \(limit) bytes"
        case .malformedText(let reason): "malformed PROXY protocol v1 header: \(reason)"
        case .unsupportedVersionOrCommand(let byte): "PROXY protocol v2 header with unsupported version/command 0x\(String(byte, radix: 16))"
        case .unsupportedFamily(let byte): "PROXY protocol v2 header with unsupported family/transport 0x\(String(byte, radix: 16))"
        case .truncatedAddresses(let family, let length):
            "PROXY protocol v2 header too short (\(length) bytes) for the addresses of family 0x\(String(family, radix: 16))"
        }
    }
}
