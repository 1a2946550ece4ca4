import Dispatch
import HomewardCore
import HomewardProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The relay's `AlarmSpool` in one file of its data directory (`alarm-spool.jsonl`): one record per line,
/// `{"v":1,"changes":…}` and a newline, appended (`O_APPEND`) and fsync'd before `append` returns. The file
/// is created 0600 (and set so if it exists with a wider mode), whatever the umask: it holds alarms with their
/// text and position.
///
/// A crash in the middle of an append leaves a last line without its newline (or with garbage): `records`
/// skips it, and the next append first ends that line, so a torn record never glues onto a good one. Every
/// line that does not read back as a record is skipped and counted, the others are returned in order.
///
/// The file calls block, so they run on a queue of the spool's own (never on an event loop or the relay's
/// queue); the relay awaits them.
public final class FileAlarmSpool: AlarmSpool {
    public let path: String
    private let codec: SpoolCodec
    private let queue = DispatchQueue(label: "homeward.alarm-spool")

    static let version: Int64 = 1
    static let newline = UInt8(ascii: "\n")

    public init(path: String, codec: SpoolCodec) {
        self.path = path
        self.codec = codec
    }

    public func append(_ changes: [StoreChange]) async throws {
        let record = JSONValue.object([("v", .int(Self.version))] + (codec.encode(changes).objectMembers ?? []))
        let line = Array(JSONWriter.string(record).utf8) + [Self.newline]
        try await run { try self.appendLine(line) }
    }

    public func records() async throws -> SpoolContents {
        let bytes = try await run { try self.readAll() }
        return parse(bytes)
    }

    public func removeAll() async throws {
        try await run {
            let fd = try self.openFile(flags: O_WRONLY)
            defer { close(fd) }
            guard ftruncate(fd, 0) == 0 else { throw SpoolFileError.failed("truncate", self.path, errno) }
            guard fsync(fd) == 0 else { throw SpoolFileError.failed("fsync", self.path, errno) }
        }
    }

    /// The records in `bytes`, skipping (and counting) every line that is not one: a torn last line, a
    /// corrupt one, one of another version.
    func parse(_ bytes: [UInt8]) -> SpoolContents {
        var contents = SpoolContents()
        var lines = bytes.split(separator: Self.newline, omittingEmptySubsequences: false)
        // After the last newline: empty, or a record whose write was cut short.
        if let last = lines.popLast(), !last.isEmpty { contents.skipped += 1 }
        for line in lines where !line.isEmpty {
            guard let text = String(validating: line, as: UTF8.self),
                  let record = try? JSONParser.parse(text),
                  record["v"] == .int(Self.version),
                  let changes = try? codec.decode(record) else {
                contents.skipped += 1
                continue
            }
            contents.records.append(changes)
        }
        return contents
    }

    // MARK: Files (on `queue`)

    private func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }

    private func openFile(flags: Int32) throws -> Int32 {
        let fd = open(path, flags | O_CLOEXEC | O_CREAT, 0o600)
        guard fd >= 0 else { throw SpoolFileError.failed("open", path, errno) }
        // Created 0600 whatever the umask; an existing file with a wider mode is narrowed.
        guard fchmod(fd, 0o600) == 0 else {
            let error = errno
            close(fd)
            throw SpoolFileError.failed("chmod", path, error)
        }
        return fd
    }

    private func appendLine(_ line: [UInt8]) throws {
        let existed = access(path, F_OK) == 0
        let fd = try openFile(flags: O_RDWR | O_APPEND)
        defer { close(fd) }
        var data = line
        // A line left without its newline (a write cut short) is ended first, so this record starts its own.
        let size = lseek(fd, 0, SEEK_END)
        if size > 0 {
            var last: UInt8 = 0
            if pread(fd, &last, 1, size - 1) == 1, last != Self.newline { data.insert(Self.newline, at: 0) }
        }
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw SpoolFileError.failed("write", path, errno)
                }
                offset += written
            }
        }
        guard fsync(fd) == 0 else { throw SpoolFileError.failed("fsync", path, errno) }
        // A new file's name is durable only once its directory is.
        if !existed { try syncDirectory() }
    }

    private func syncDirectory() throws {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let fd = open(directory.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SpoolFileError.failed("open directory of", path, errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw SpoolFileError.failed("fsync directory of", path, errno) }
    }

    private func readAll() throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return [] }
            throw SpoolFileError.failed("open", path, errno)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw SpoolFileError.failed("read", path, errno)
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }
}

/// A spool file call that failed, with the system's reason.
public struct SpoolFileError: Error, CustomStringConvertible {
    public let description: String

    static func failed(_ call: String, _ path: String, _ code: Int32) -> SpoolFileError {
        SpoolFileError(description: "cannot \(call) \(path): \(String(cString: strerror(code)))")
    }
}

extension JSONValue {
    var objectMembers: [(String, JSONValue)]? {
        if case .object(let members) = self { return members }
        return nil
    }
}
