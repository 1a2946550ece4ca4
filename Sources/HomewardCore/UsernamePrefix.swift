import HomewardProtocol

/// A `user.search` prefix as a store looks it up (`RelayStore.searchUsers`): the range of usernames that start
/// with it, `prefix <= username < upperBound`, which a store reads off the users' primary key in username order
/// instead of testing every name.
///
/// Stored usernames are normalised (`Username.normalize`: 3-32 of `a-z 0-9 _ . -`, lowercase), so only a
/// prefix of those characters can start one. Any other (empty, longer than a username, uppercase, a space, NUL,
/// non-ASCII) is no prefix: the search finds nobody, in every store alike. The relay's rule normalises the
/// query before it asks; this is the stores' own guard, not a second normalisation.
public struct UsernamePrefix: Sendable, Equatable {
    /// The prefix itself: the first username that can start with it.
    public let lowerBound: String
    /// The prefix with its last character moved on by one: every username that starts with the prefix sorts
    /// before it (usernames are ASCII and compared by code point, as both stores' keys are), and every other
    /// name at or after the prefix sorts at or after it. The last character is at most `z`, so this is `{` at
    /// most: still ASCII.
    public let upperBound: String

    /// The characters a stored username is made of: `Username.allowed`, lowercase.
    static let characters = Username.allowed.filter { !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }

    public init?(_ prefix: String) {
        let bytes = Array(prefix.utf8)
        guard let last = bytes.last, bytes.count <= 32, bytes.allSatisfy(Self.characters.contains) else { return nil }
        lowerBound = prefix
        upperBound = String(decoding: bytes.dropLast() + [last + 1], as: UTF8.self)
    }

    /// Whether `username` starts with the prefix: what the range selects, as a filter over a list.
    public func matches(_ username: String) -> Bool {
        username.utf8.starts(with: lowerBound.utf8)
    }

    /// The profiles of up to `limit` users in the range, in username order (`UserProfile` from each row's
    /// `username` and free-text `name`, `profile(from:)`), for both stores.
    public func statement(limit: Int) -> StoredStatement {
        StoredStatement("SELECT username, name FROM users WHERE username >= ? AND username < ? ORDER BY username LIMIT ?",
                        [.text(lowerBound), .text(upperBound), .int(Int64(max(0, limit)))])
    }

    /// A row of `statement(limit:)`.
    public static func profile<Row: StoredRow>(from row: Row) throws -> UserProfile {
        UserProfile(username: try row.text(0), name: try row.freeText(1))
    }
}
