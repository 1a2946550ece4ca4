import Foundation
import HomewardCore

/// Strings that reach SQLite whole.
///
/// GRDB binds a Swift `String` with `sqlite3_bind_text(..., -1, ...)` and reads TEXT back with
/// `String(cString:)`: both stop at the first NUL. So `"help\u{0} at the bridge"` was stored as
/// `"help"`, and a lookup of `"kate1\u{0}"` compared as `"kate1"` and found kate1's row.
///
/// - Free text a user wrote (display names, notes, alarm texts, reasons) is bound as the UTF-8 bytes
///   in a BLOB, which SQLite stores and returns by length. GRDB decodes a BLOB column as a `String`
///   from its UTF-8, and rows written as TEXT before this still read the same.
/// - Keys compared in SQL (usernames, ids, token hashes) and the other strings stored as TEXT stay TEXT
///   so that indexes and equality keep working, and a change with NUL in one is refused
///   (`StoredStatement.textWithNUL`): it cannot be stored faithfully, and a key must never match the key
///   it would be truncated to.
enum ExactText {
    static func blob(_ text: String) -> Data { Data(text.utf8) }

    /// Whether SQLite compares `key` as the whole string.
    static func isStorableKey(_ key: String) -> Bool { !key.utf8.contains(0) }
}
