import Foundation
import HomewardProtocol

/// Reads and writes profiles as `<config>/profiles/<name>.json`.
///
/// A profile holds a bearer token, so the directory is created 0700 and each file is written
/// 0600 to a temporary name and renamed into place: it is never readable by others, not even
/// for a moment, and a crash never leaves half a file.
struct ProfileStore: Sendable {
    let directory: String

    init(directory: String = ConfigDirectory.resolve()) {
        self.directory = directory
    }

    static func validate(name: String) throws(CLIError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains), !name.hasPrefix(".") else {
            throw .usage("profile names are 1-64 characters of letters, digits, _ . - (not starting with .)")
        }
    }

    func path(of name: String) -> String { "\(directory)/profiles/\(name).json" }

    /// The profile, or an empty one if it was never saved.
    func load(_ name: String) throws(CLIError) -> Profile {
        try Self.validate(name: name)
        let path = path(of: name)
        guard FileManager.default.fileExists(atPath: path) else { return Profile() }
        guard let data = FileManager.default.contents(atPath: path) else { throw .profile("cannot read \(path)") }
        do {
            return Profile(json: try JSONParser.parse(Array(data)))
        } catch {
            throw .profile("\(path) is not valid JSON (\(error)); fix or delete it")
        }
    }

    func save(_ profile: Profile, as name: String) throws(CLIError) {
        try Self.validate(name: name)
        let folder = "\(directory)/profiles"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw .profile("cannot create \(folder): \(error.localizedDescription)")
        }
        let target = path(of: name)
        let temporary = "\(target).\(getpid()).tmp"
        var bytes = Array(JSONWriter.string(profile.json).utf8)
        bytes.append(UInt8(ascii: "\n"))
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .profile("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        // O_CREAT's mode is filtered by the umask and ignored for an existing file: set it explicitly.
        fchmod(fd, 0o600)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, target) == 0 else {
            unlink(temporary)
            throw .profile("cannot write \(target): \(String(cString: strerror(errno)))")
        }
    }
}
