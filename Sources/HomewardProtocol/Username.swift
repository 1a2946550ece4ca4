/// The contract's rules for usernames, display names and passwords.
public enum Username {
    public static let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-".utf8)

    /// Checks `raw` is 3-32 characters of `a-z 0-9 _ . -` (either case) and lowercases it.
    /// The check comes first: Unicode lowercasing maps some non-ASCII letters (KELVIN SIGN) to ASCII.
    public static func normalize(_ raw: String, field: String = "username") throws(ProtocolError) -> String {
        guard (3...32).contains(raw.utf8.count), raw.utf8.allSatisfy(allowed.contains) else {
            throw .badRequest("\(field) must be 3-32 characters of a-z 0-9 _ . -")
        }
        return raw.lowercased()
    }

    public static func validateDisplayName(_ name: String) throws(ProtocolError) -> String {
        guard name.unicodeScalars.count <= 64 else { throw .badRequest("name is longer than 64 characters") }
        return name
    }

    public static func validatePassword(_ password: String) throws(ProtocolError) {
        guard (8...256).contains(password.count) else { throw .badRequest("password must be 8-256 characters") }
    }
}
