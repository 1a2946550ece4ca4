import ArgumentParser
import HomewardClient
import HomewardProtocol

/// The account's signed-in devices (its tokens), and revoking one.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "List the devices signed in to your account; revoke one.",
        discussion: "Each register or login signs a device in with its own token. A token expires after a time without use (30 days by default).",
        subcommands: [List.self, Revoke.self],
        defaultSubcommand: List.self)

    @OptionGroup var global: GlobalOptions

    struct List: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Signed-in devices, oldest first.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let sessions = try await context.call { () async throws(RelayClientError) in try await context.client.deviceSessions() }
            if context.console.json {
                context.console.line(JSONWriter.string(["type": "sessions", "sessions": .array(sessions.map(\.json))]))
                return
            }
            var table = TextTable("ID", "SIGNED IN", "LAST USED", "EXPIRES", "")
            for session in sessions {
                table.add(session.id, HumanFormat.time(session.createdAt), HumanFormat.time(session.lastUsed),
                          HumanFormat.time(session.expiresAt), session.isCurrent ? "(this device)" : "")
            }
            context.console.line(table.render())
        }
    }

    struct Revoke: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "Sign a device out by its id (from `homeward sessions`).")
        @OptionGroup var global: GlobalOptions
        @Argument var id: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.revokeDeviceSession(id) }
            context.console.emit("revoked \(id)", json: ["type": "session.revoked", "id": .string(id)])
        }
    }
}
