#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address, and whether a push may be sent to it.
struct IPAddressBytes: Sendable, Equatable, CustomStringConvertible {
    let bytes: [UInt8]

    init(bytes: [UInt8]) {
        precondition(bytes.count == 4 || bytes.count == 16, "an IP address is 4 or 16 bytes")
        self.bytes = bytes
    }

    /// Parses a literal IPv4 or IPv6 address (no brackets), or nil for a host name. IPv4 is read as
    /// `inet_aton` reads it, which is how the system resolver reads a host name made of numbers:
    /// `2130706433`, `0x7f.1` and `017700000001` are all 127.0.0.1.
    init?(literal: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET6, literal, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: v6) { Array($0) })
        } else if !literal.isEmpty, inet_aton(literal, &v4) != 0 {
            self.init(bytes: withUnsafeBytes(of: v4) { Array($0) })
        } else {
            return nil
        }
    }

    var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }

    /// The special-purpose block the address is in (`SpecialPurposeBlock`), judging an IPv4 address
    /// embedded in an IPv6 one as that IPv4 address; nil for an address a push may go to.
    var specialPurpose: SpecialPurposeBlock? { SpecialPurposeBlock.containing(self) }

    var isPublic: Bool { specialPurpose == nil }

    /// The IPv4 address an IPv4-mapped (`::ffff:0:0/96`) or NAT64 well-known-prefix (`64:ff9b::/96`) IPv6
    /// address stands for: the relay's network reaches that IPv4 address when it connects to it.
    var embeddedIPv4: IPAddressBytes? {
        guard bytes.count == 16 else { return nil }
        let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        let nat64 = bytes.prefix(12).elementsEqual([0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] as [UInt8])
        return mapped || nat64 ? IPAddressBytes(bytes: Array(bytes[12..<16])) : nil
    }
}

/// The address blocks no push is sent to: every entry of the IANA IPv4 and IPv6 Special-Purpose
/// Address Registries (RFC 6890 and its updates), whether or not the registry marks it globally
/// reachable, plus IPv4 multicast, IPv6 multicast and site-local, and all of IPv6 outside 2000::/3
/// (global unicast). A push service is an ordinary public web server; none lives in these.
struct SpecialPurposeBlock: Sendable, Equatable, CustomStringConvertible {
    let prefix: [UInt8]
    let length: Int
    let name: String

    var description: String { name }

    /// `prefix` is padded with zeros to an address of its family: 16 bytes for IPv6, else 4.
    private init(_ prefix: [UInt8], _ length: Int, _ name: String, v6: Bool = false) {
        let size = v6 ? 16 : 4
        precondition(prefix.count <= size && length <= size * 8, "a prefix fits its address family")
        self.prefix = prefix + [UInt8](repeating: 0, count: size - prefix.count)
        self.length = length
        self.name = name
    }

    func contains(_ address: IPAddressBytes) -> Bool {
        guard address.bytes.count == prefix.count else { return false }
        var remaining = length
        for (index, byte) in prefix.enumerated() where remaining > 0 {
            let bits = min(8, remaining)
            let mask: UInt8 = bits == 8 ? 0xff : ~(0xff >> bits)
            guard address.bytes[index] & mask == byte & mask else { return false }
            remaining -= bits
        }
        return true
    }

    static func containing(_ address: IPAddressBytes) -> SpecialPurposeBlock? {
        if let v4 = address.embeddedIPv4 { return containing(v4) }
        if address.bytes.count == 4 { return ipv4.first { $0.contains(address) } }
        if let block = ipv6.first(where: { $0.contains(address) }) { return block }
        return globalUnicast.contains(address) ? nil : outsideGlobalUnicast
    }

    static let ipv4: [SpecialPurposeBlock] = [
        .init([0], 8, "\"this network\" (0.0.0.0/8)"),
        .init([10], 8, "private-use (10.0.0.0/8)"),
        .init([100, 64], 10, "shared address space (100.64.0.0/10)"),
        .init([127], 8, "loopback (127.0.0.0/8)"),
        .init([169, 254], 16, "link-local (169.254.0.0/16)"),
        .init([172, 16], 12, "private-use (172.16.0.0/12)"),
        .init([192, 0, 0], 24, "IETF protocol assignments (192.0.0.0/24)"),
        .init([192, 0, 2], 24, "documentation (192.0.2.0/24)"),
        .init([192, 31, 196], 24, "AS112-v4 (192.31.196.0/24)"),
        .init([192, 52, 193], 24, "AMT (192.52.193.0/24)"),
        .init([192, 88, 99], 24, "deprecated 6to4 relay anycast (192.88.99.0/24)"),
        .init([192, 168], 16, "private-use (192.168.0.0/16)"),
        .init([192, 175, 48], 24, "direct delegation AS112 (192.175.48.0/24)"),
        .init([198, 18], 15, "benchmarking (198.18.0.0/15)"),
        .init([198, 51, 100], 24, "documentation (198.51.100.0/24)"),
        .init([203, 0, 113], 24, "documentation (203.0.113.0/24)"),
        .init([224], 4, "multicast (224.0.0.0/4)"),
        .init([240], 4, "reserved (240.0.0.0/4, with the limited broadcast 255.255.255.255)"),
    ]

    /// Inside 2000::/3; everything outside it (loopback, unspecified, IPv4-compatible `::a.b.c.d`,
    /// discard-only, local-use NAT64 `64:ff9b:1::/48`, unique local, link-local, site-local, multicast,
    /// SRv6 SIDs) is refused as not global unicast. Mapped and NAT64 well-known-prefix addresses are
    /// judged as their IPv4 address before this list.
    static let ipv6: [SpecialPurposeBlock] = [
        .init([0x20, 0x01, 0x00], 23, "IETF protocol assignments (2001::/23, with Teredo, ORCHIDv2, benchmarking)", v6: true),
        .init([0x20, 0x01, 0x0d, 0xb8], 32, "documentation (2001:db8::/32)", v6: true),
        .init([0x20, 0x02], 16, "6to4 (2002::/16)", v6: true),
        .init([0x26, 0x20, 0x00, 0x4f, 0x80, 0x00], 48, "direct delegation AS112 (2620:4f:8000::/48)", v6: true),
        .init([0x3f, 0xff], 20, "documentation (3fff::/20)", v6: true),
    ]

    static let globalUnicast = SpecialPurposeBlock([0x20], 3, "global unicast (2000::/3)", v6: true)
    static let outsideGlobalUnicast = SpecialPurposeBlock([], 0, "not global unicast (outside 2000::/3: loopback, IPv4-compatible, unique or link-local, site-local, multicast, ...)", v6: true)
}
