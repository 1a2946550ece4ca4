import HomewardProtocol

/// A user as others see them: `{username, name}`.
public struct User: Sendable, Equatable, Hashable {
    public var username: String
    public var name: String

    public init(username: String, name: String) {
        self.username = username
        self.name = name
    }

    init?(json: JSONValue?) {
        guard let json, let username = json.string("username") else { return nil }
        self.init(username: username, name: json.string("name") ?? username)
    }

    public var json: JSONValue { ["username": .string(username), "name": .string(name)] }
}

/// The reply to `register` and `login`: who we are and the token to `hello` with next time.
public struct SignIn: Sendable, Equatable {
    public var user: User
    public var token: String
}
