import ArgumentParser
import HomewardClient
import HomewardProtocol

struct ShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share your walk: start a follow-me session, invite more friends, end it, or make a link for someone without an account.",
        subcommands: [Start.self, Invite.self, End.self, List.self, Link.self, Links.self, Revoke.self, Always.self],
        defaultSubcommand: List.self)

    @OptionGroup var global: GlobalOptions

    struct Start: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "start", abstract: "Start a follow-me session and invite friends (default: all of them).")
        @OptionGroup var global: GlobalOptions
        @Option(name: .long, parsing: .upToNextOption, help: "Friends to invite (repeat, or separate with commas).")
        var invite: [String] = []
        @Option(help: "A note for the invitees, e.g. \"walking home from the station\".") var note: String?
        @Option(help: ArgumentHelp("Ask the relay to raise an alarm if you have not checked in within this many minutes (relay safety extension).", valueName: "minutes"))
        var checkIn: Double?
        @Option(help: ArgumentHelp("End the session by itself on arrival within RADIUS metres (default 50) of LAT,LON (relay safety extension).", valueName: "lat,lon[,radius]"))
        var destination: String?
        @Option(help: ArgumentHelp("End the session after this many minutes (relay safety extension).", valueName: "minutes"))
        var ttl: Double?

        /// Both become whole milliseconds or seconds (Int64), where infinity or NaN would trap; the relay takes at
        /// most 7 days ahead for either.
        func validate() throws {
            let maxMinutes = Double(SessionOptions.maxHorizonMillis) / 60_000
            for (option, minutes) in [("--check-in", checkIn), ("--ttl", ttl)] {
                if let minutes, !(minutes > 0 && minutes <= maxMinutes) {
                    throw ValidationError("\(option) must be more than 0 and at most \(Int(maxMinutes)) minutes (7 days)")
                }
            }
        }

        func execute(in context: CommandContext) async throws {
            let invitees = NameList.parse(invite)
            var options = SessionOptions(invite: invitees.isEmpty ? nil : invitees, note: note)
            if let checkIn { options.checkInBy = HumanFormat.nowMillis() + Int64(checkIn * 60_000) }
            if let ttl { options.ttl = Int64((ttl * 60).rounded()) }
            if let destination { options.destination = try Self.parseDestination(destination) }
            let session = try await context.call { () async throws(RelayClientError) in
                try await context.client.startSession(options)
            }
            context.console.emit("started session \(session.id); invited: \(session.invited.isEmpty ? "nobody (no friends yet)" : session.invited.joined(separator: ", "))\(SessionText.safety(session))",
                                 json: ["type": "session.started", "session": SessionText.json(session)])
        }

        static func parseDestination(_ text: String) throws(CLIError) -> Destination {
            let parts = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2 || parts.count == 3, let point = Coordinate(parsing: "\(parts[0]),\(parts[1])") else {
                throw .usage("--destination must be LAT,LON or LAT,LON,RADIUS")
            }
            let radius = parts.count == 3 ? parts[2] : 50
            guard Destination.radiusRange.contains(radius) else { throw .usage("--destination radius must be 10-5000 metres") }
            return Destination(lat: point.lat, lon: point.lon, radius: radius)
        }
    }

    struct Invite: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "invite", abstract: "Invite more friends to your session.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Friends to invite.") var usernames: [String]
        @Option(help: "The session (default: your active one).") var session: String?

        func execute(in context: CommandContext) async throws {
            let id = try await OwnSession.id(session, in: context)
            let updated = try await context.call { () async throws(RelayClientError) in
                try await context.client.inviteToSession(id, invite: NameList.parse(usernames))
            }
            context.console.emit("invited \(NameList.parse(usernames).joined(separator: ", ")); \(SessionText.summary(updated))",
                                 json: ["type": "session.invited", "session": SessionText.json(updated)])
        }
    }

    struct End: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "end", abstract: "End your session; everyone invited is told.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "The session (default: your active one).") var session: String?

        func execute(in context: CommandContext) async throws {
            let id = try await OwnSession.id(session, in: context)
            try await context.call { () async throws(RelayClientError) in try await context.client.endSession(id) }
            context.console.emit("ended session \(id)", json: ["type": "session.ended", "sessionId": .string(id)])
        }
    }

    struct List: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Your session, the ones you follow, and your invitations.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let list = try await context.call { () async throws(RelayClientError) in try await context.client.sessionList() }
            if context.console.json {
                context.console.line(JSONWriter.string([
                    "type": "sessions", "own": list.own.map(SessionText.json) ?? .null,
                    "following": .array(list.following.map(SessionText.json)), "invites": .array(list.invites.map(SessionText.json)),
                ]))
                return
            }
            context.console.line("yours:      " + (list.own.map(SessionText.summary) ?? "none (homeward share start)"))
            for session in list.following { context.console.line("following:  " + SessionText.summary(session)) }
            for session in list.invites {
                context.console.line("invited to: " + SessionText.summary(session) + "  (homeward follow \(session.owner.username))")
            }
        }
    }
}

/// Finds the id of our own active session when none is given.
enum OwnSession {
    static func id(_ given: String?, in context: CommandContext) async throws(CLIError) -> String {
        if let given { return given }
        let list = try await context.call { () async throws(RelayClientError) in try await context.client.sessionList() }
        guard let own = list.own else {
            throw CLIError(code: "not_found", message: "you have no active session (homeward share start)", exitCode: CLIError.Status.rejected)
        }
        return own.id
    }
}

/// Usernames given as repeated values and/or comma-separated lists, lowercased, without repeats.
enum NameList {
    static func parse(_ values: [String]) -> [String] {
        var seen = Set<String>()
        return values.flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty && seen.insert($0).inserted }
    }
}
