import HomewardProtocol

/// A user as others see them: `{username, name}` on the wire.
public struct UserProfile: Sendable, Equatable {
    public let username: String
    public var name: String

    public init(username: String, name: String) {
        self.username = username
        self.name = name
    }

    public var json: JSONValue { ["username": .string(username), "name": .string(name)] }
}
