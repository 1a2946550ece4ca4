import ServiceLifecycle

/// Returns malloc's free pages to the kernel now and then (`FreedMemory`), from the relay's start until its
/// graceful shutdown. Between two runs, what requests and sign-ins allocate and drop (decoded rows of the slices
/// a cache of connected users reads, handshakes' buffers, replies) stays resident in the arenas of the threads that
/// freed it; once a minute it goes back. On the concurrency pool, never an event loop: a trim holds each arena's
/// lock for the milliseconds it walks it.
struct FreedMemoryService: Service, CustomStringConvertible {
    static let interval = Duration.seconds(60)

    let relay: ReadySignal<StartedRelay>
    var description: String { "freed memory" }

    func run() async throws {
        _ = try await relay.value
        await cancelWhenGracefulShutdown {
            while (try? await Task.sleep(for: Self.interval)) != nil {
                FreedMemory.release()
            }
        }
    }
}
