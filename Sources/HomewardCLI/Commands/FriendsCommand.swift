import ArgumentParser
import HomewardClient
import HomewardProtocol

struct FriendsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "friends",
        abstract: "Ask, accept, decline and remove friends; list and search; block people.",
        subcommands: [List.self, Request.self, Accept.self, Decline.self, Remove.self, Search.self,
                      Block.self, Unblock.self, Blocks.self, Where.self],
        defaultSubcommand: List.self)

    @OptionGroup var global: GlobalOptions

    struct List: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Friends with their presence, and pending requests.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let list = try await context.call { () async throws(RelayClientError) in try await context.client.friendList() }
            if context.console.json {
                context.console.line(JSONWriter.string(.object([("type", "friends")] + [
                    ("friends", .array(list.friends.map { friend in
                        ["username": .string(friend.user.username), "name": .string(friend.user.name),
                         "online": .bool(friend.online), "lastSeen": friend.lastSeen.map(JSONValue.int) ?? .null]
                    })),
                    ("incoming", .array(list.incoming.map(\.json))),
                    ("outgoing", .array(list.outgoing.map(\.json))),
                ])))
                return
            }
            if list.friends.isEmpty {
                context.console.line("no friends yet: homeward friends request USERNAME")
            } else {
                var table = TextTable("USERNAME", "NAME", "STATUS", "LAST SEEN")
                for friend in list.friends {
                    let seen = friend.online ? "" : friend.lastSeen.map { "\(HumanFormat.time($0)) (\(HumanFormat.ago($0)))" } ?? "never"
                    table.add(friend.user.username, friend.user.name, friend.online ? "online" : "offline", seen)
                }
                context.console.line(table.render())
            }
            if !list.incoming.isEmpty {
                context.console.line("asking you: " + list.incoming.map(\.username).joined(separator: ", ")
                                     + "  (homeward friends accept USERNAME)")
            }
            if !list.outgoing.isEmpty {
                context.console.line("you asked: " + list.outgoing.map(\.username).joined(separator: ", "))
            }
        }
    }

    struct Request: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "request", abstract: "Ask someone to be your friend (accepts at once if they already asked you).")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            let outcome = try await context.call { () async throws(RelayClientError) in
                try await context.client.requestFriend(username.lowercased())
            }
            switch outcome {
            case .requested:
                context.console.emit("asked \(username.lowercased()) to be your friend",
                                     json: ["type": "friend.requested", "username": .string(username.lowercased())])
            case .friends:
                context.console.emit("you and \(username.lowercased()) are now friends (they had asked you)",
                                     json: ["type": "friend.added", "username": .string(username.lowercased())])
            }
        }
    }

    struct Accept: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "accept", abstract: "Accept a friend request.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            let user = try await context.call { () async throws(RelayClientError) in
                try await context.client.acceptFriend(username.lowercased())
            }
            context.console.emit("you and \(user.username) are now friends", json: ["type": "friend.added", "user": user.json])
        }
    }

    struct Decline: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "decline", abstract: "Decline a friend request.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            try await FriendsCommand.act(on: username, in: context, said: "declined", event: "friend.declined") { client, name throws(RelayClientError) in
                try await client.declineFriend(name)
            }
        }
    }

    struct Remove: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "End a friendship, or withdraw your request. Ends sessions and alarm links between you.")
        @OptionGroup var global: GlobalOptions
        @Argument var username: String

        func execute(in context: CommandContext) async throws {
            try await FriendsCommand.act(on: username, in: context, said: "removed", event: "friend.removed") { client, name throws(RelayClientError) in
                try await client.removeFriend(name)
            }
        }
    }

    struct Search: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "search", abstract: "Find users whose name starts with a prefix.")
        @OptionGroup var global: GlobalOptions
        @Argument var prefix: String

        func execute(in context: CommandContext) async throws {
            let users = try await context.call { () async throws(RelayClientError) in try await context.client.searchUsers(prefix.lowercased()) }
            FriendsCommand.show(users, as: "users", none: "nobody's name starts with \"\(HumanFormat.shown(prefix.lowercased()))\"", in: context)
        }
    }
}
