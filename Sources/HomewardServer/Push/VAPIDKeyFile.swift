import Foundation
import HomewardWebPush

/// The relay's VAPID key: the operator's PEM file, or one made on first start in the data directory
/// (like the development certificate), readable by the relay's user only. Keeping it across restarts
/// keeps every browser subscription valid: subscriptions are bound to the key they were made with.
enum VAPIDKeyFile {
    static let defaultName = "vapid-key.pem"

    static func load(path: String?, dataDirectory: String) throws -> VAPIDKey {
        if let path { return try read(path) }
        let path = dataDirectory + "/" + defaultName
        if FileManager.default.fileExists(atPath: path) { return try read(path) }
        let key = VAPIDKey.generate()
        try create(key, at: path)
        return key
    }

    private static func read(_ path: String) throws -> VAPIDKey {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw RelayStartupError.badVAPIDKey(path: path, reason: RelayStartupError.fileReason(error))
        }
        do {
            return try VAPIDKey(pem: text)
        } catch {
            throw RelayStartupError.badVAPIDKey(path: path, reason: error.description)
        }
    }

    /// Written to a temporary file created with mode 0600 and renamed, so the key is never readable by
    /// others, not even for a moment, and a crash leaves either no key or a whole one.
    private static func create(_ key: VAPIDKey, at path: String) throws {
        let temporary = path + ".tmp-\(getpid())"
        let bytes = Array(key.pem.utf8)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw RelayStartupError.badVAPIDKey(path: path, reason: String(cString: strerror(errno))) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw RelayStartupError.badVAPIDKey(path: path, reason: reason)
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
