import ArgumentParser
import HomewardClient
import HomewardProtocol

struct PanicCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "panic",
        abstract: "Raise a panic alarm: your alarm contacts (or all friends) get it at once, or when they come back online.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "What to tell them (default: a generic call for help).") var text: String?
    @Option(name: .long, parsing: .upToNextOption, help: "Only these friends (repeat, or separate with commas).") var to: [String] = []
    @Option(help: ArgumentHelp("Where you are (default: your last sent position).", valueName: "lat,lon")) var at: String?
    @Option(help: "Accuracy of --at in metres.") var acc: Double?

    func execute(in context: CommandContext) async throws {
        var request = AlarmRequest(text: text, acc: acc, to: to.isEmpty ? nil : NameList.parse(to))
        if let at {
            guard let point = Coordinate(parsing: at) else { throw CLIError.usage("--at must be LAT,LON") }
            request.lat = point.lat
            request.lon = point.lon
        }
        let raised = try await AlarmRaiser.raise(request, in: context)
        context.console.emit(AlarmRaiser.describe(raised), json: AlarmRaiser.json(raised))
    }
}

/// Raising an alarm, shared by `panic` and `walk --panic-at`.
enum AlarmRaiser {
    static func raise(_ request: AlarmRequest, in context: CommandContext) async throws(CLIError) -> RaisedAlarm {
        let raised = try await context.call { () async throws(RelayClientError) in try await context.client.raiseAlarm(request) }
        try context.updateProfile { $0.lastAlarmId = raised.alarm.id }
        return raised
    }

    static func describe(_ raised: RaisedAlarm) -> String {
        let recipients = raised.recipients.map { "\($0.username)\($0.online ? "" : " (offline; gets it on return)")" }
        return "PANIC raised: alarm \(raised.alarm.id) sent to " + (recipients.isEmpty ? "nobody (no friends)" : recipients.joined(separator: ", "))
            + "; cancel with: homeward cancel"
    }

    static func json(_ raised: RaisedAlarm) -> JSONValue {
        [
            "type": "alarm.raised", "alarmId": .string(raised.alarm.id), "text": .string(raised.alarm.text),
            "position": raised.alarm.position?.json ?? .null, "createdAt": .int(raised.alarm.createdAt),
            "recipients": .array(raised.recipients.map { ["username": .string($0.username), "online": .bool($0.online)] }),
        ]
    }
}

struct AckCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "ack", abstract: "Acknowledge an alarm sent to you: its owner and the others see you are on it.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The alarm id, as printed with the alarm.") var alarmId: String

    func execute(in context: CommandContext) async throws {
        try await context.call { () async throws(RelayClientError) in try await context.client.acknowledgeAlarm(alarmId) }
        context.console.emit("acknowledged alarm \(alarmId)", json: ["type": "alarm.acked", "alarmId": .string(alarmId)])
    }
}

struct CancelCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel your alarm (default: the last one this profile raised).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The alarm id.") var alarmId: String?
    @Option(help: "Why, for the recipients (default: cancelled).") var reason: String?

    func execute(in context: CommandContext) async throws {
        guard let id = alarmId ?? context.profile.lastAlarmId else {
            throw CLIError.usage("no alarm id given and this profile has not raised one")
        }
        try await context.call { () async throws(RelayClientError) in try await context.client.cancelAlarm(id, reason: reason) }
        if context.profile.lastAlarmId == id { try context.updateProfile { $0.lastAlarmId = nil } }
        context.console.emit("cancelled alarm \(id)", json: ["type": "alarm.cancelled", "alarmId": .string(id)])
    }
}

struct ContactsCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "contacts",
        abstract: "Show or set who gets your alarms when you do not name recipients.",
        discussion: "Without arguments shows the contacts; with usernames replaces them; --clear goes back to all friends.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "Friends to make your alarm contacts.") var usernames: [String] = []
    @Flag(help: "Remove all contacts: alarms then go to all friends.") var clear = false

    func execute(in context: CommandContext) async throws {
        guard !(clear && !usernames.isEmpty) else { throw CLIError.usage("give usernames or --clear, not both") }
        let newContacts: [String]? = clear ? [] : (usernames.isEmpty ? nil : NameList.parse(usernames))
        let contacts = try await context.call { () async throws(RelayClientError) in
            try await context.client.alarmContacts(set: newContacts)
        }
        context.console.emit(contacts.isEmpty ? "alarm contacts: none (alarms go to all friends)" : "alarm contacts: " + contacts.joined(separator: ", "),
                             json: ["type": "alarm.contacts", "usernames": .strings(contacts)])
    }
}
