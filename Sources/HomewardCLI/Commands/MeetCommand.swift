import ArgumentParser
import HomewardClient
import HomewardProtocol

/// `homeward meet`: meeting points with friends (issue 15).
struct MeetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "meet",
        abstract: "Propose a place and time to meet to friends; accept, decline, cancel, list.",
        discussion: "Friends who are offline get the proposal when they next connect; you are told when it reached them.",
        subcommands: [List.self, Propose.self, Accept.self, Decline.self, Cancel.self],
        defaultSubcommand: List.self)

    @OptionGroup var global: GlobalOptions

    struct Propose: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "propose", abstract: "Propose a meeting point to one or more friends.")
        @OptionGroup var global: GlobalOptions
        @Option(name: .long, parsing: .upToNextOption, help: "Friends to invite (repeat, or separate with commas).") var to: [String]
        @Option(help: ArgumentHelp("Where to meet.", valueName: "lat,lon")) var at: String
        @Option(help: "What the place is called (1-100 characters).") var name: String
        @Option(name: .customLong("in"), help: ArgumentHelp("When: this many minutes from now (-60 to 43200).", valueName: "minutes"))
        var minutes: Double = 0

        func execute(in context: CommandContext) async throws {
            guard let point = Coordinate(parsing: at) else { throw CLIError.usage("--at must be LAT,LON") }
            guard (-60...43_200).contains(minutes) else { throw CLIError.usage("--in must be -60 to 43200 minutes") }
            let names = NameList.parse(to)
            guard !names.isEmpty else { throw CLIError.usage("--to needs at least one friend") }
            let proposal = MeetingProposal(to: names, lat: point.lat, lon: point.lon, name: name,
                                           time: HumanFormat.nowMillis() + Int64((minutes * 60_000).rounded()))
            let meeting = try await context.call { () async throws(RelayClientError) in try await context.client.proposeMeeting(proposal) }
            context.console.emit("proposed \(meeting.id): \(MeetingText.summary(meeting))", json: ["type": "meet.proposed", "meeting": meeting.json])
        }
    }

    struct Accept: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "accept", abstract: "Accept a meeting point you were invited to.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The meeting point's id.") var id: String

        func execute(in context: CommandContext) async throws { try await MeetingText.answer(id, accept: true, in: context) }
    }

    struct Decline: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "decline", abstract: "Decline a meeting point you were invited to.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The meeting point's id.") var id: String

        func execute(in context: CommandContext) async throws { try await MeetingText.answer(id, accept: false, in: context) }
    }

    struct Cancel: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "cancel", abstract: "Withdraw a meeting point you proposed.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The meeting point's id.") var id: String

        func execute(in context: CommandContext) async throws {
            try await context.call { () async throws(RelayClientError) in try await context.client.cancelMeeting(id) }
            context.console.emit("cancelled meeting point \(id)", json: ["type": "meet.cancelled", "meetingId": .string(id)])
        }
    }

    struct List: RelayCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Meeting points you proposed or were invited to.")
        @OptionGroup var global: GlobalOptions

        func execute(in context: CommandContext) async throws {
            let meetings = try await context.call { () async throws(RelayClientError) in try await context.client.meetings() }
            if context.console.json {
                context.console.line(JSONWriter.string(["type": "meetings", "meetings": .array(meetings.map(\.json))]))
                return
            }
            if meetings.isEmpty { context.console.line("no meeting points (homeward meet propose)") }
            for meeting in meetings { context.console.line("\(meeting.id)  \(MeetingText.summary(meeting))") }
        }
    }
}

/// How the CLI shows a meeting point.
enum MeetingText {
    static func summary(_ meeting: MeetingInfo) -> String {
        let answers = meeting.invited.map { invitee in
            "\(invitee.username) \(invitee.response.rawValue)\(invitee.deliveredAt == nil ? " (not delivered yet)" : "")"
        }
        return "\"\(HumanFormat.shown(meeting.name))\" at \(HumanFormat.coordinate(meeting.lat, meeting.lon)), "
            + "\(HumanFormat.time(meeting.time)), from \(meeting.from.username): \(answers.joined(separator: ", "))"
    }

    static func answer(_ id: String, accept: Bool, in context: CommandContext) async throws {
        let meeting = try await context.call { () async throws(RelayClientError) in try await context.client.answerMeeting(id, accept: accept) }
        context.console.emit("\(accept ? "accepted" : "declined") \(id): \(summary(meeting))",
                             json: ["type": accept ? "meet.accepted" : "meet.declined", "meeting": meeting.json])
    }
}
