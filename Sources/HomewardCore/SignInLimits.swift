/// What a sign-in is limited by (`RelayLimits`), per username or client address, a `SlidingWindowLimit` each: failed
/// logins per username and per address, accounts created per address, failed `watch`es and `hello`s per address.
struct SignInLimits {
    var usernameFailures: SlidingWindowLimit
    var addressFailures: SlidingWindowLimit
    /// Accounts created per client address.
    var registrations: SlidingWindowLimit
    /// Failed `watch` attempts per client address.
    var watchFailures: SlidingWindowLimit
    /// Failed `hello` attempts (unknown, revoked or expired tokens) per client address (`Relay+SignIn`).
    var helloFailures: SlidingWindowLimit

    init(_ limits: RelayLimits) {
        usernameFailures = SlidingWindowLimit(limit: limits.loginFailuresPerUsername, window: limits.loginFailureWindow)
        addressFailures = SlidingWindowLimit(limit: limits.loginFailuresPerAddress, window: limits.loginFailureWindow)
        registrations = SlidingWindowLimit(limit: limits.registrationsPerAddress, window: limits.registrationWindow)
        watchFailures = SlidingWindowLimit(limit: limits.watchFailuresPerAddress, window: limits.watchFailureWindow)
        helloFailures = SlidingWindowLimit(limit: limits.helloFailuresPerAddress, window: limits.loginFailureWindow)
    }

    /// Drops the keys whose events have all left their windows (`SlidingWindowLimit.forgetExpired`).
    mutating func forgetExpired(now: Int64) {
        usernameFailures.forgetExpired(now: now)
        addressFailures.forgetExpired(now: now)
        registrations.forgetExpired(now: now)
        watchFailures.forgetExpired(now: now)
        helloFailures.forgetExpired(now: now)
    }

    /// How many keys (usernames, client addresses) they hold events of.
    var keyCount: Int {
        [usernameFailures, addressFailures, registrations, watchFailures, helloFailures].reduce(0) { $0 + $1.keyCount }
    }
}
