/// The contract's rules for usernames, display names and passwords.
public enum Username {
    public static let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-".utf8)

    /// What a malformed `login` username becomes: a name no account can have (it fails `normalize`), so
    /// the relay looks it up, finds nothing, does the same password work as for an unknown user and
    /// answers `unauthenticated`. A malformed name must not be told apart from wrong credentials.
    public static let unmatchable = ""

    /// Checks `raw` is 3-32 characters of `a-z 0-9 _ . -` (either case) and lowercases it.
    /// The check comes first: Unicode lowercasing maps some non-ASCII letters (KELVIN SIGN) to ASCII.
    public static func normalize(_ raw: String, field: String = "username") throws(ProtocolError) -> String {
        guard isWellFormed(raw) else {
            throw .badRequest("\(field) must be 3-32 characters of a-z 0-9 _ . -")
        }
        return raw.lowercased()
    }

    /// The name a `login` looks up: the normalised name, or `unmatchable` when `raw` could never have been
    /// registered (a NUL, a space, too long): `"kate1\u{0}"` must not reach storage as another spelling of `kate1`.
    public static func loginName(_ raw: String) -> String {
        isWellFormed(raw) ? raw.lowercased() : unmatchable
    }

    private static func isWellFormed(_ raw: String) -> Bool {
        (3...32).contains(raw.utf8.count) && raw.utf8.allSatisfy(allowed.contains)
    }

    /// A display name: at most 64 characters, none of which can drive a terminal or reorder the text
    /// around it when another user's screen shows it.
    public static func validateDisplayName(_ name: String) throws(ProtocolError) -> String {
        guard name.unicodeScalars.count <= 64 else { throw .badRequest("name is longer than 64 characters") }
        guard !name.unicodeScalars.contains(where: DisplayText.isUnsafeInName) else {
            throw .badRequest("name must not contain control characters or bidirectional overrides")
        }
        return name
    }

    public static func validatePassword(_ password: String) throws(ProtocolError) {
        guard (8...256).contains(password.count) else { throw .badRequest("password must be 8-256 characters") }
    }
}
