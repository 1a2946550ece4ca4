import NIOCore

/// Reads the PROXY protocol header a trusted load balancer puts before the client's bytes, in both
/// versions of haproxy's proxy-protocol.txt: v1, one text line (`PROXY TCP4 192.0.2.7 10.0.0.11 51234 8443\r\n`),
/// and v2, a binary block (haproxy's `send-proxy-v2`).
///
/// A value without I/O: `ProxyHeaderHandler` feeds it what it reads and acts on the returned action;
/// the unit tests feed it directly. It refuses as soon as the first bytes cannot start a header, so a
/// client speaking TLS straight to the relay from a trusted address is closed at its first read.
struct ProxyHeaderDecoder {
    /// The most bytes a header may take. A v2 header is 16 bytes, its addresses (at most 216, for UNIX
    /// sockets) and TLVs (TLS details, cloud endpoint ids), which the relay skips; 2 KiB leaves room for
    /// those and bounds what a misconfigured balancer can make the relay hold.
    static let maximumBytes = 2048
    /// The longest v1 line, CRLF included (the specification's own bound).
    static let maximumTextBytes = 107
    static let binarySignature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let textPrefix = Array("PROXY ".utf8)

    enum Action: Equatable {
        case needMoreBytes
        /// The header, and what came after it in the same reads (the client's first TLS bytes), to pass on.
        case decoded(ProxyHeader, remainder: ByteBuffer)
    }

    private enum State {
        case reading(ByteBuffer)
        /// Decoded or refused: the handler is done with the decoder.
        case finished
    }

    private var state = State.reading(ByteBuffer())

    /// Takes the next bytes read from the connection. Throws when they cannot be (the start of) a header.
    mutating func feed(_ bytes: ByteBuffer) throws(ProxyHeaderError) -> Action {
        guard case .reading(var buffered) = state else {
            preconditionFailure("ProxyHeaderDecoder fed after it decoded or refused a header")
        }
        state = .finished
        buffered.writeImmutableBuffer(bytes)
        guard let (header, length) = try Self.parse(buffered.readableBytesView) else {
            state = .reading(buffered)
            return .needMoreBytes
        }
        buffered.moveReaderIndex(forwardBy: length)
        return .decoded(header, remainder: buffered)
    }

    /// The header at the start of `bytes` and its length, or nil when `bytes` is a valid beginning of one.
    static func parse(_ bytes: ByteBufferView) throws(ProxyHeaderError) -> (ProxyHeader, Int)? {
        switch bytes.first {
        case nil: return nil
        case binarySignature[0]: return try parseBinary(bytes)
        case textPrefix[0]: return try parseText(bytes)
        default: throw .missing
        }
    }

    // MARK: v2

    /// Address family and transport (the 14th byte) → the length of its address block.
    private static let addressBlockLengths: [UInt8: Int] = [
        0x00: 0,    // UNSPEC: the balancer gives no addresses
        0x11: 12,   // TCP over IPv4: source, destination (4 bytes each), source port, destination port
        0x21: 36,   // TCP over IPv6: the same with 16-byte addresses
        0x31: 216,  // UNIX stream: two 108-byte paths
    ]

    private static func parseBinary(_ bytes: ByteBufferView) throws(ProxyHeaderError) -> (ProxyHeader, Int)? {
        guard bytes.prefix(binarySignature.count).elementsEqual(binarySignature.prefix(bytes.count)) else { throw .missing }
        guard bytes.count >= 16 else { return nil }
        let fixed = Array(bytes.prefix(16))
        let versionCommand = fixed[12], family = fixed[13]
        let total = 16 + (Int(fixed[14]) << 8 | Int(fixed[15]))
        // Version 2; command 0 (LOCAL) or 1 (PROXY). The specification says to drop anything else.
        guard versionCommand >> 4 == 2, versionCommand & 0x0F <= 1 else { throw .unsupportedVersionOrCommand(versionCommand) }
        guard total <= maximumBytes else { throw .tooLong(limit: maximumBytes) }
        guard bytes.count >= total else { return nil }
        // LOCAL: the balancer's own connection (health checks); the family and addresses are to be ignored.
        if versionCommand & 0x0F == 0 { return (.local, total) }
        guard let needed = addressBlockLengths[family] else { throw .unsupportedFamily(family) }
        guard total - 16 >= needed else { throw .truncatedAddresses(family: family, length: total - 16) }
        let block = Array(bytes.dropFirst(16).prefix(needed))  // what follows (TLVs) is skipped
        let source: SocketAddress?
        switch family {
        case 0x11: source = packedAddress(block[0..<4], port: block[8..<10])
        case 0x21: source = packedAddress(block[0..<16], port: block[32..<34])
        default: source = nil  // UNSPEC or a UNIX socket: no client IP address to count
        }
        return (ProxyHeader(source: source), total)
    }

    private static func packedAddress(_ address: ArraySlice<UInt8>, port: ArraySlice<UInt8>) -> SocketAddress? {
        let portNumber = Int(port[port.startIndex]) << 8 | Int(port[port.startIndex + 1])
        return (try? SocketAddress(packedIPAddress: ByteBuffer(bytes: address), port: portNumber))?.unmappingIPv4
    }

    // MARK: v1

    private static func parseText(_ bytes: ByteBufferView) throws(ProxyHeaderError) -> (ProxyHeader, Int)? {
        guard bytes.prefix(textPrefix.count).elementsEqual(textPrefix.prefix(bytes.count)) else { throw .missing }
        let window = bytes.prefix(maximumTextBytes)
        guard let lineFeed = window.firstIndex(of: UInt8(ascii: "\n")) else {
            if bytes.count >= maximumTextBytes { throw .tooLong(limit: maximumTextBytes) }
            return nil
        }
        let line = window[window.startIndex..<lineFeed]
        guard line.last == UInt8(ascii: "\r") else { throw .malformedText("the line does not end in CRLF") }
        let content = line.dropLast()
        guard content.allSatisfy({ (0x20..<0x7F).contains($0) }) else { throw .malformedText("not printable ASCII") }
        let length = line.count + 1
        let fields = String(decoding: content, as: UTF8.self).split(separator: " ", omittingEmptySubsequences: false)
        switch fields[1] {
        case "UNKNOWN":
            // The balancer cannot tell (or speaks for itself); the rest of the line is to be ignored.
            return (.local, length)
        case "TCP4", "TCP6":
            guard fields.count == 6 else { throw .malformedText("expected PROXY \(fields[1]) SOURCE DESTINATION SPORT DPORT") }
            let ipv6 = fields[1] == "TCP6"
            let source = try textAddress(fields[2], port: fields[4], ipv6: ipv6)
            _ = try textAddress(fields[3], port: fields[5], ipv6: ipv6)
            return (ProxyHeader(source: source.unmappingIPv4), length)
        default:
            throw .malformedText("unknown protocol '\(fields[1])'")
        }
    }

    private static func textAddress(_ host: Substring, port: Substring, ipv6: Bool) throws(ProxyHeaderError) -> SocketAddress {
        // Decimal without leading zeroes (the specification forbids them: they could be read as octal).
        guard (1...5).contains(port.utf8.count), port.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              port == "0" || !port.hasPrefix("0"), let number = Int(port), number <= 65535 else {
            throw .malformedText("bad port '\(port)'")
        }
        // inet_pton: dotted quads without leading zeroes, IPv6 in any valid form; no scope ids
        // ("fe80::1%eth0"), which NIO would look up as interface names.
        guard !host.contains("%"), let address = try? SocketAddress(ipAddress: String(host), port: number) else {
            throw .malformedText("bad address '\(host)'")
        }
        switch (address, ipv6) {
        case (.v4, false), (.v6, true): return address
        default: throw .malformedText("'\(host)' is not an \(ipv6 ? "IPv6" : "IPv4") address")
        }
    }
}
