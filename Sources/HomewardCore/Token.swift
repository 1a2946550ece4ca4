import Crypto
import Foundation

/// Bearer tokens: 256 random bits for the client, only their SHA-256 for storage.
public enum Token {
    public static func mint() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Lowercase hex of the SHA-256: two digits a byte, written straight into the string (a `String(format:)` a byte
    /// cost more than the hash, and every `hello` hashes its token).
    public static func hash(_ token: String) -> String {
        let digest = SHA256.hash(data: Array(token.utf8))
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: SHA256.byteCount * 2) { buffer in
            var index = 0
            for byte in digest {
                buffer[index] = digits[Int(byte >> 4)]
                buffer[index + 1] = digits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
    }
}
