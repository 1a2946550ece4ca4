import ArgumentParser
import HomewardClient
import HomewardProtocol

/// `homeward msg`: short messages to friends, with delivered and read receipts (issue 15).
struct MsgCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "msg",
        abstract: "Send a short message to a friend (delivered now or when they are next online), or mark one read.",
        discussion: "Receipts (msg.delivered, msg.read) and incoming messages show in `homeward watch`.",
        subcommands: [Send.self, Read.self],
        defaultSubcommand: Send.self)

    @OptionGroup var global: GlobalOptions

    struct Send: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "send", abstract: "Send TEXT (1-1000 characters, one line) to a friend; at most 30 a minute.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend.") var username: String
        @Argument(help: "The message; several words are joined with spaces.") var text: [String]

        func execute(in context: CommandContext) async throws {
            let body = text.joined(separator: " ")
            guard (1...FreeText.messageLimit).contains(body.unicodeScalars.count) else {
                throw CLIError.usage("a message is 1 to \(FreeText.messageLimit) characters")
            }
            let message = try await context.call { () async throws(RelayClientError) in
                try await context.client.sendMessage(to: username.lowercased(), text: body)
            }
            let state = message.deliveredAt == nil ? "queued until \(message.to) is online" : "delivered"
            context.console.emit("message \(message.id) to \(message.to): \(state)", json: ["type": "msg.sent", "message": message.json])
        }
    }

    struct Read: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "read", abstract: "Mark a message sent to you as read; its sender is told, and the relay forgets it.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The message's id (shown by homeward watch).") var id: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.markRead(id) }
            context.console.emit("marked \(id) read", json: ["type": "msg.marked", "messageId": .string(id)])
        }
    }
}
