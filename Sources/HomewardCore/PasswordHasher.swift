import Crypto
import _CryptoExtras
import Foundation

/// PBKDF2-HMAC-SHA256 password hashing, self-describing so the cost can be raised later:
/// `pbkdf2-sha256$<iterations>$<salt base64>$<key base64>`.
public struct PasswordHasher: Sendable {
    /// OWASP's Password Storage Cheat Sheet (2023) asks for 600,000 iterations of PBKDF2-HMAC-SHA256.
    public static let recommendedIterations = 600_000
    /// The lowest count swift-crypto's checked API accepts.
    public static let minimumIterations = 210_000

    public let iterations: Int

    public init(iterations: Int = recommendedIterations) {
        self.iterations = max(iterations, Self.minimumIterations)
    }

    public func hash(_ password: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let key = derive(password, salt: salt, iterations: iterations)
        return "pbkdf2-sha256$\(iterations)$\(Data(salt).base64EncodedString())$\(key.base64EncodedString())"
    }

    public func verify(_ password: String, against encoded: String) -> Bool {
        let parts = encoded.split(separator: "$")
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let rounds = Int(parts[1]),
              let salt = Data(base64Encoded: String(parts[2])), let expected = Data(base64Encoded: String(parts[3]))
        else { return false }
        let key = derive(password, salt: Array(salt), iterations: rounds)
        // Constant-time comparison: the time taken must not reveal how much of the key matched.
        guard key.count == expected.count else { return false }
        return zip(key, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// Spends the same time as a real verification, so unknown usernames cannot be told apart by timing.
    public func burn(_ password: String) {
        _ = derive(password, salt: Array(repeating: 0, count: 16), iterations: iterations)
    }

    private func derive(_ password: String, salt: [UInt8], iterations: Int) -> Data {
        let key = try! KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32,
            unsafeUncheckedRounds: iterations)
        return key.withUnsafeBytes { Data($0) }
    }
}
