import Foundation
import NIOCore

/// A block of IP addresses written as CIDR (`10.0.0.0/8`, `2001:db8::/32`; a bare address is the block
/// of that one address): the balancers `--proxy-protocol-from` trusts to send PROXY headers.
public struct IPAddressRange: Sendable, Equatable, CustomStringConvertible {
    /// The network's bytes (4 or 16), host bits zero.
    private let network: [UInt8]
    public let prefixLength: Int

    public init(parsing text: String) throws(IPAddressRangeError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let host = String(parts[0])
        guard !host.contains("%"), let bytes = (try? SocketAddress(ipAddress: host, port: 0))?.ipBytes else {
            throw IPAddressRangeError(text: text, reason: "'\(host)' is not an IPv4 or IPv6 address")
        }
        let bits = bytes.count * 8
        var prefixLength = bits
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...3).contains(digits.utf8.count), digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                  let length = Int(digits), length <= bits else {
                throw IPAddressRangeError(text: text, reason: "the prefix length must be 0 to \(bits)")
            }
            prefixLength = length
        }
        let network = Self.masked(bytes, prefixLength)
        // 10.0.0.1/8 is most likely a typo for 10.0.0.0/8 or 10.0.0.1/32: say so rather than guess.
        guard network == bytes else {
            throw IPAddressRangeError(text: text, reason: "the address has bits set beyond the /\(prefixLength) prefix")
        }
        self.network = network
        self.prefixLength = prefixLength
    }

    /// Parses a comma-separated list (`10.0.0.11,10.0.0.12/31`); spaces around the commas are allowed.
    public static func parseList(_ text: String) throws(IPAddressRangeError) -> [IPAddressRange] {
        var ranges: [IPAddressRange] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { throw IPAddressRangeError(text: text, reason: "an empty item in the list") }
            ranges.append(try IPAddressRange(parsing: trimmed))
        }
        return ranges
    }

    /// Whether `address` is in the block. An IPv4 peer seen on a dual-stack socket (`::ffff:10.0.0.11`)
    /// is in an IPv4 block.
    public func contains(_ address: SocketAddress) -> Bool {
        guard let bytes = address.ipBytes, bytes.count == network.count else { return false }
        return Self.masked(bytes, prefixLength) == network
    }

    public var description: String {
        let address = (try? SocketAddress(packedIPAddress: ByteBuffer(bytes: network), port: 0))?.ipAddress ?? "?"
        return "\(address)/\(prefixLength)"
    }

    private static func masked(_ bytes: [UInt8], _ prefixLength: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let keep = min(8, max(0, prefixLength - index * 8))
            return keep == 8 ? byte : byte & ~(0xFF >> keep)
        }
    }
}

/// A `--proxy-protocol-from` entry that is not an address block.
public struct IPAddressRangeError: Error, Equatable, CustomStringConvertible {
    public let text: String
    public let reason: String

    public var description: String { "'\(text)' is not an address or CIDR block: \(reason)" }
}
