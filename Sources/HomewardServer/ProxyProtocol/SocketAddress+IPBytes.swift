import Foundation
import NIOCore

extension SocketAddress {
    /// The IP address in network byte order: 4 bytes for IPv4 (also for an IPv4-mapped IPv6 address,
    /// `::ffff:a.b.c.d`, which a dual-stack socket reports for an IPv4 peer), 16 for IPv6; nil for a UNIX socket.
    var ipBytes: [UInt8]? {
        switch self {
        case .v4(let address):
            return withUnsafeBytes(of: address.address.sin_addr) { Array($0) }
        case .v6(let address):
            let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
            return Self.isIPv4Mapped(bytes) ? Array(bytes[12...]) : bytes
        case .unixDomainSocket:
            return nil
        }
    }

    /// An IPv4-mapped IPv6 address as the IPv4 address it stands for, so that one client counts as one
    /// address for the per-address limits however the balancer wrote it; any other address unchanged.
    var unmappingIPv4: SocketAddress {
        guard case .v6 = self, let bytes = ipBytes, bytes.count == 4,
              let ipv4 = try? SocketAddress(packedIPAddress: ByteBuffer(bytes: bytes), port: port ?? 0) else { return self }
        return ipv4
    }

    private static func isIPv4Mapped(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
    }
}
