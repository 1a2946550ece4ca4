import HomewardProtocol

/// A user as others see them: `{username, name}` (the wire model's `UserInfo`).
public typealias User = UserInfo

/// The reply to `register` and `login`: who we are and the token to `hello` with next time.
public struct SignIn: Sendable, Equatable {
    public var user: User
    public var token: String
}
