import ArgumentParser
import HomewardClient
import HomewardProtocol

/// `homeward pause` / `homeward resume`: hide your location from everyone or from one friend (issue 15).
struct PauseCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Hide your location from everyone, or from one friend, until you resume or for a while.",
        discussion: """
            While paused, nobody gets your positions: not the friends you share with at all times, not the \
            observers of your session, and (for a pause from everyone) not share-link viewers. An alarm always \
            carries your position to its recipients; the reply says so when one is active. Pausing again \
            replaces the end time. The relay ends a timed pause by itself, also after a restart.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "Hide from this friend only (default: from everyone).") var from: String?
    @Option(name: .customLong("for"), help: ArgumentHelp("End the pause after this many minutes (at most 7 days).", valueName: "minutes"))
    var minutes: Double?

    func execute(in context: CommandContext) async throws {
        if let minutes, !(minutes > 0 && minutes <= 7 * 24 * 60) { throw CLIError.usage("--for must be more than 0 and at most 10080 minutes") }
        let until = minutes.map { HumanFormat.nowMillis() + Int64(($0 * 60_000).rounded()) }
        let reply = try await context.call { () async throws(RelayClientError) in
            try await context.client.pauseLocation(from: from?.lowercased(), until: until)
        }
        context.console.emit(SharingText.summary(reply), json: .object([("type", "location.paused")] + reply.fields))
    }
}

struct ResumeCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "End a pause: the one from everyone, or the one from a friend (--from).")
    @OptionGroup var global: GlobalOptions
    @Option(help: "End the pause from this friend (default: the pause from everyone).") var from: String?

    func execute(in context: CommandContext) async throws {
        let reply = try await context.call { () async throws(RelayClientError) in
            try await context.client.resumeLocation(from: from?.lowercased())
        }
        context.console.emit(SharingText.summary(reply), json: .object([("type", "location.resumed")] + reply.fields))
    }
}
