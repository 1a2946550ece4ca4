/// What `homeward sim` is asked to do.
struct SimulationPlan: Sendable {
    var walkers: Int
    var watchersPerWalker: Int
    /// Positions per second per walker.
    var rate: Double
    /// Seconds of walking.
    var duration: Double
    var alarms: Int
    /// Usernames are `<prefix>w<i>` and `<prefix>w<i>o<j>`: a fresh random prefix per run keeps
    /// runs against the same relay apart (accounts cannot be deleted through the protocol).
    var prefix: String
    var password: String
    /// How long to wait for the last deliveries after the last send.
    var drainTimeout: Double
    /// Connections opened or signed up at once while setting up.
    var setupConcurrency: Int

    var positionsPerWalker: Int { max(1, Int((rate * duration).rounded())) }
    var connections: Int { walkers * (watchersPerWalker + 1) }

    func walkerName(_ walker: Int) -> String { "\(prefix)w\(walker)" }
    func watcherName(_ walker: Int, _ watcher: Int) -> String { "\(prefix)w\(walker)o\(watcher)" }

    static func randomPrefix() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return "sim" + String((0..<6).map { _ in alphabet.randomElement()! }) + "-"
    }
}
