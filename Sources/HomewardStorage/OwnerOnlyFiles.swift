import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The data directory and the database hold every account's password hash, tokens' hashes, alarms with
/// their positions and texts: they are for the relay's own user only, whatever umask it was started with.
///
/// SQLite creates a new database file with mode 0644 (its `SQLITE_DEFAULT_FILE_PERMISSIONS`, set with
/// `fchmod`, so even a strict umask does not help), and its `-wal`, `-shm` and `-journal` files with
/// the database file's mode. So the database file is made (or tightened) to 0600 before SQLite opens
/// it, and the companions that already exist are tightened too; new ones then follow the database.
public enum OwnerOnlyFiles {
    public static let directoryMode: mode_t = 0o700
    public static let fileMode: mode_t = 0o600

    /// Creates `path` (with any missing parents) as a directory with mode 0700. An existing directory
    /// is left as the operator made it (a service manager may own its mode); the files in it are 0600.
    public static func createDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return }
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: Int(directoryMode)])
        // mkdir's mode is filtered by the umask: set it exactly.
        try FileManager.default.setAttributes([.posixPermissions: Int(directoryMode)], ofItemAtPath: path)
    }

    /// Makes the SQLite database at `path` and its existing companion files 0600, creating an empty
    /// database file (which SQLite takes as a new database) when there is none.
    public static func prepareDatabase(at path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, fileMode)
        guard fd >= 0 else { throw PermissionError(path: path, call: "open", code: errno) }
        defer { close(fd) }
        // O_CREAT's mode is filtered by the umask and ignored for an existing file.
        guard fchmod(fd, fileMode) == 0 else { throw PermissionError(path: path, call: "chmod", code: errno) }
        for suffix in ["-wal", "-shm", "-journal"] {
            let companion = path + suffix
            if chmod(companion, fileMode) != 0, errno != ENOENT {
                throw PermissionError(path: companion, call: "chmod", code: errno)
            }
        }
    }

    public struct PermissionError: Error, CustomStringConvertible {
        public let path: String
        public let call: String
        public let code: Int32
        public var description: String { "\(call) \(path): \(String(cString: strerror(code)))" }
    }
}
