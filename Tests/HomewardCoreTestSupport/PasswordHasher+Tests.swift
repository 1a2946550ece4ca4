import HomewardCore

extension PasswordHasher {
    /// Checks passwords like the real one at a thousandth of its cost. Tests of sign-in behaviour use it;
    /// `PasswordHasherTests` and the process tests keep the real count.
    package static let forTests = PasswordHasher(unsafeIterations: 200)
}
