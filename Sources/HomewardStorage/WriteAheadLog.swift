import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SQLite's write-ahead log, given its working size when the database opens, so that commits overwrite it.
///
/// A new log grows by every commit's frames until a checkpoint lets SQLite start it over from its beginning.
/// An fdatasync that grows a file must also make its new size durable (on ext4 a commit of the file system's
/// journal); one that overwrites it need not: on the project's benchmark machine, 8 KiB and an fdatasync took
/// 1.6 ms appended and 0.74-0.99 ms overwritten. A relay's first thousands of commits after each start (the
/// log is removed when the database closes) would each pay that. So the log is extended with zeros up to the
/// size it reaches before SQLite's automatic checkpoint, once, before the first commit. SQLite reads a log only
/// up to its first invalid frame, and ignores one whose header is invalid: zeros add nothing it reads.
enum WriteAheadLog {
    /// The log's size just before the automatic checkpoint: its header, and `pages` frames of a page each.
    static func workingSize(pageSize: Int, pages: Int) -> Int { headerSize + pages * (frameHeaderSize + pageSize) }

    static let headerSize = 32
    static let frameHeaderSize = 24

    /// Extends the log at `path` with zeros to `size` bytes and syncs it; a log that is that long already, or
    /// that does not exist, is left alone. Only where nothing writes to the log meanwhile (on the writer
    /// connection, between transactions): the zeros go past its end, never over a frame. Best effort: a
    /// log that could not be extended works as before, growing with its commits.
    static func extend(_ path: String, to size: Int) {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        var end = Int(info.st_size)
        guard end < size else { return }
        let zeros = [UInt8](repeating: 0, count: 64 * 1024)
        while end < size {
            let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, min($0.count, size - end), off_t(end)) }
            guard written > 0 else { return }
            end += written
        }
        _ = fsync(fd)
    }
}
