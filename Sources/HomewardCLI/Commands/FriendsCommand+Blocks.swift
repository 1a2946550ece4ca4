import ArgumentParser
import HomewardClient
import HomewardProtocol

extension FriendsCommand {
    /// One request about `username` whose answer is only that it was done: "blocked ann" or
    /// `{"type": "user.blocked", "username": "ann"}`.
    static func act(on username: String, in context: CommandContext, said verb: String, event type: String,
                    _ request: @escaping @Sendable (RelayClient, String) async throws(RelayClientError) -> Void) async throws {
        let name = username.lowercased()
        try await context.call { () async throws(RelayClientError) in try await request(context.client, name) }
        context.console.emit("\(verb) \(name)", json: ["type": .string(type), "username": .string(name)])
    }

    /// A list of users: a table, `none` when empty, or one JSON line `{"type": type, "users": [...]}`.
    static func show(_ users: [User], as type: String, none: String, in context: CommandContext) {
        if context.console.json {
            context.console.line(JSONWriter.string(["type": .string(type), "users": .array(users.map(\.json))]))
        } else if users.isEmpty {
            context.console.line(none)
        } else {
            var table = TextTable("USERNAME", "NAME")
            for user in users { table.add(user.username, user.name) }
            context.console.line(table.render())
        }
    }

    struct Block: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "block",
            abstract: "Block someone: ends your friendship, and their friend requests no longer reach you. They are not told.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            try await FriendsCommand.act(on: username, in: context, said: "blocked", event: "user.blocked") { client, name throws(RelayClientError) in
                try await client.blockUser(name)
            }
        }
    }

    struct Unblock: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "unblock", abstract: "Unblock someone you blocked.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            try await FriendsCommand.act(on: username, in: context, said: "unblocked", event: "user.unblocked") { client, name throws(RelayClientError) in
                try await client.unblockUser(name)
            }
        }
    }

    struct Blocks: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "blocks", abstract: "The people you blocked.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let users = try await context.call { () async throws(RelayClientError) in try await context.client.blockedUsers() }
            FriendsCommand.show(users, as: "blocks", none: "you have not blocked anyone", in: context)
        }
    }
}
