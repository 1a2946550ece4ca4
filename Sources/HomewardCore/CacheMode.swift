/// How much of the stored state a relay keeps in memory.
public enum CacheMode: String, Sendable, CaseIterable {
    /// Every user's part, loaded at start and kept current: the relay reads nothing on demand.
    case whole
    /// The part of the users it serves (`RelayState.resident`): what deadlines need is loaded at start, a user's
    /// slice when they sign in or a request names them, and the rest is read from the store on demand, so that
    /// memory and start time follow the connected users rather than the registered ones.
    case connected
}
