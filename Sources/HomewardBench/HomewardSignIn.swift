import HomewardProtocol

/// Signed-in connections to a relay a tool started itself (`homeward-cache-bench`'s relay mode), which knows the
/// accounts it filled the store with instead of registering them through this library's drivers.
public enum HomewardSignIn {
    /// A WebSocket to the relay on 127.0.0.1:`port`, from `source`, signed in with `request` (`login` or `hello`):
    /// returned once the relay answered `ok`; throws with the relay's error code otherwise, or after `timeout` seconds.
    public static func connect(_ env: BenchEnvironment, port: Int, source: String?, _ request: Request,
                               timeout: Double = 60) async throws -> BenchSocket {
        let link = try await HomewardLink.connect(env, port: port, source: source)
        let reply = await link.exchange(request, timeout: timeout)
        guard reply.string("type") == "ok" else {
            link.socket.close()
            throw BenchError.failed("homeward: \(request.type): \(reply.string("code") ?? "?"): \(reply.string("message") ?? "")")
        }
        return link.socket
    }
}
