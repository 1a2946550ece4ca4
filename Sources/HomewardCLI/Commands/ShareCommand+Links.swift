import ArgumentParser
import HomewardClient
import HomewardProtocol

/// `homeward share link|links|revoke`: links that let someone without an account watch your walk.
extension ShareCommand {
    struct Link: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "link",
            abstract: "Make a link that lets someone without an account watch your active session in a browser.",
            discussion: """
                Prints the link's URL. The relay keeps only a hash of its token, so the URL is shown this once; \
                anyone with it can watch your positions, alarms and the session's end until it expires or you \
                revoke it (homeward share revoke ID). It never outlives the session.
                """)
        @OptionGroup var global: GlobalOptions
        @Option(help: ArgumentHelp("How long the link works, in seconds: 60 to 604800 (7 days), never past the session's end. [default: 7200]",
                                   valueName: "seconds"))
        var ttl: Int64?
        @Option(help: "The session (default: your active one).") var session: String?

        func execute(in context: CommandContext) async throws {
            if let ttl, !(60...604_800).contains(ttl) { throw CLIError.usage("--ttl must be 60 to 604800 seconds") }
            let id = try await OwnSession.id(session, in: context)
            let share = try await context.call { () async throws(RelayClientError) in
                try await context.client.createShare(sessionId: id, ttl: ttl)
            }
            context.console.emit(
                "\(share.url ?? "(no url)")\nlink \(share.id) works until \(HumanFormat.time(share.expiresAt)); revoke it with: homeward share revoke \(share.id)",
                json: ["type": "share.created", "share": share.json])
        }
    }

    struct Links: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "links", abstract: "Your live share links (their URLs cannot be shown again).")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let shares = try await context.call { () async throws(RelayClientError) in try await context.client.shareLinks() }
            if context.console.json {
                context.console.line(JSONWriter.string(["type": "shares", "shares": .array(shares.map(\.json))]))
                return
            }
            if shares.isEmpty { context.console.line("no live share links (homeward share link)") }
            for share in shares {
                context.console.line("\(share.id)  session \(share.sessionId ?? "?")  until \(HumanFormat.time(share.expiresAt))")
            }
        }
    }

    struct Revoke: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke", abstract: "End a share link at once; whoever watches with it is disconnected.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The link's id (homeward share links).") var id: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.revokeShare(id) }
            context.console.emit("revoked share link \(id)", json: ["type": "share.revoked", "shareId": .string(id)])
        }
    }
}
