import ArgumentParser
import HomewardClient
import HomewardProtocol

extension FriendsCommand {
    struct Block: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "block",
            abstract: "Block someone: ends your friendship, and their friend requests no longer reach you. They are not told.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.blockUser(username.lowercased()) }
            context.console.emit("blocked \(username.lowercased())", json: ["type": "user.blocked", "username": .string(username.lowercased())])
        }
    }

    struct Unblock: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "unblock", abstract: "Unblock someone you blocked.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.unblockUser(username.lowercased()) }
            context.console.emit("unblocked \(username.lowercased())", json: ["type": "user.unblocked", "username": .string(username.lowercased())])
        }
    }

    struct Blocks: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "blocks", abstract: "The people you blocked.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let users = try await context.call { () async throws(RelayClientError) in try await context.client.blockedUsers() }
            if context.console.json {
                context.console.line(JSONWriter.string(["type": "blocks", "users": .array(users.map(\.json))]))
            } else if users.isEmpty {
                context.console.line("you have not blocked anyone")
            } else {
                var table = TextTable("USERNAME", "NAME")
                for user in users { table.add(user.username, user.name) }
                context.console.line(table.render())
            }
        }
    }
}
