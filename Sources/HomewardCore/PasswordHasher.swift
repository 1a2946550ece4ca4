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
    static let saltBytes = 16
    static let keyBytes = 32

    public let iterations: Int
    /// What a login for an unknown username is checked against: a stored hash in every respect (this
    /// hasher's iterations, a random salt and key of the usual sizes) that no password matches. Checking
    /// it runs exactly the code and the work of checking a real one, so an unknown username is answered
    /// no sooner than a wrong password (a zero-salt `derive` call alone was measurably faster).
    public let dummyHash: String

    public init(iterations: Int = recommendedIterations) {
        self.init(unsafeIterations: max(iterations, Self.minimumIterations))
    }

    /// A hasher with any count, even one far below what protects a password: only for tests, where the
    /// real cost (about 0.1 s a hash) would be most of a suite's time. The relay's options never make one;
    /// `PasswordHasherTests` and the process tests keep the real cost.
    public init(unsafeIterations iterations: Int) {
        precondition(iterations >= 1, "PBKDF2 needs at least one iteration")
        self.iterations = iterations
        self.dummyHash = Encoded(rounds: iterations, salt: Self.randomBytes(Self.saltBytes),
                                 key: Data(Self.randomBytes(Self.keyBytes))).description
    }

    public func hash(_ password: String) -> String {
        let salt = Self.randomBytes(Self.saltBytes)
        return Encoded(rounds: iterations, salt: salt, key: derive(password, salt: salt, iterations: iterations)).description
    }

    public func verify(_ password: String, against encoded: String) -> Bool {
        guard let stored = Encoded(encoded) else { return false }
        let key = derive(password, salt: stored.salt, iterations: stored.rounds)
        // Constant-time comparison: the time taken must not reveal how much of the key matched.
        guard key.count == stored.key.count else { return false }
        return zip(key, stored.key).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The work of a failed login for a username nobody has: `verify` against `dummyHash`. Always false.
    @discardableResult
    public func burn(_ password: String) -> Bool {
        verify(password, against: dummyHash)
    }

    private func derive(_ password: String, salt: [UInt8], iterations: Int) -> Data {
        let key = try! KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: Self.keyBytes,
            unsafeUncheckedRounds: iterations)
        return key.withUnsafeBytes { Data($0) }
    }

    private static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A stored hash, parsed.
    struct Encoded: CustomStringConvertible {
        let rounds: Int
        let salt: [UInt8]
        let key: Data

        init(rounds: Int, salt: [UInt8], key: Data) {
            self.rounds = rounds
            self.salt = salt
            self.key = key
        }

        init?(_ encoded: String) {
            let parts = encoded.split(separator: "$")
            guard parts.count == 4, parts[0] == "pbkdf2-sha256", let rounds = Int(parts[1]), rounds > 0,
                  let salt = Data(base64Encoded: String(parts[2])), let key = Data(base64Encoded: String(parts[3]))
            else { return nil }
            self.init(rounds: rounds, salt: Array(salt), key: key)
        }

        var description: String {
            "pbkdf2-sha256$\(rounds)$\(Data(salt).base64EncodedString())$\(key.base64EncodedString())"
        }
    }
}
