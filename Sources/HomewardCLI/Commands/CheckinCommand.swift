import ArgumentParser
import HomewardClient
import HomewardProtocol

/// Moves (or clears) the check-in deadline of your active session, so the relay does not raise
/// a missed check-in alarm on your behalf.
struct CheckinCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkin",
        abstract: "Check in on your walk: set the next deadline, or clear it.",
        discussion: """
            A session started with `share start --check-in MINUTES` makes the relay raise an alarm for you \
            if the deadline passes while the session is active. `checkin --next 10` moves the deadline \
            10 minutes from now; `checkin` alone clears it.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: ArgumentHelp("The next deadline, in minutes from now (up to 7 days); omit to clear it.", valueName: "minutes"))
    var next: Double?
    @Option(help: "The session (default: your active one).") var session: String?

    func validate() throws {
        let maxMinutes = Double(SessionOptions.maxHorizonMillis) / 60_000
        if let next, !(next > 0 && next <= maxMinutes) {
            throw ValidationError("--next must be more than 0 and at most \(Int(maxMinutes)) minutes (7 days)")
        }
    }

    func execute(in context: CommandContext) async throws {
        let id = try await OwnSession.id(session, in: context)
        let deadline = next.map { HumanFormat.nowMillis() + Int64(($0 * 60_000).rounded()) }
        try await context.call { () async throws(RelayClientError) in
            try await context.client.checkIn(id, nextBy: deadline)
        }
        if let deadline {
            context.console.emit("checked in; next check-in due by \(HumanFormat.time(deadline))",
                                 json: ["type": "session.checkin", "sessionId": .string(id), "checkInBy": .int(deadline)])
        } else {
            context.console.emit("checked in; no further check-in deadline",
                                 json: ["type": "session.checkin", "sessionId": .string(id), "checkInBy": .null])
        }
    }
}
