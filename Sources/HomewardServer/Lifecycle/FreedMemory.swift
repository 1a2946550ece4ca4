#if canImport(Glibc)
import Glibc
#endif

/// Gives the pages malloc holds free back to the kernel.
///
/// glibc keeps what a thread frees in that thread's arena for reuse, and returns it to the kernel only from
/// the top of the heap. The start's load (every active session's rows, decoded, indexed, then dropped) frees
/// tens of megabytes in the middle of the arenas of the threads that read and indexed them: resident until
/// something reuses them, which may be never. `malloc_trim` releases every free page of every arena, once, before
/// the first connection is served. While serving, only at the end of a storm of evictions (`Relay`'s
/// `releaseFreedMemory`, once per 1,000 users or more let go of, off the relay's queue): it walks every free chunk of
/// an arena under that arena's lock (about 10 ms on a 600 MB heap of small chunks with one in 40 free, 300-500 ms with
/// half of them free), and the event loops allocating from that arena wait that long, which is worth it only when
/// a large part of the heap was freed at once.
enum FreedMemory {
    static func release() {
        #if canImport(Glibc)
        _ = trim?(0)
        #endif
    }

    #if canImport(Glibc)
    /// glibc's `malloc_trim`, which the Glibc module does not import (`malloc.h` is not in its headers): looked up in
    /// the process's own symbols once. Nil with another C library, and then nothing is released.
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        guard let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
    #endif
}
