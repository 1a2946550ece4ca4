import ArgumentParser
import HomewardClient
import HomewardProtocol

struct PosCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "pos",
        abstract: "Send one position to whoever follows you or has your alarm.",
        discussion: "A negative latitude looks like an option: write `homeward pos -- -33.92,18.42`.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Where you are.", valueName: "lat,lon")) var coordinate: String
    @Option(help: "Accuracy in metres.") var acc: Double?
    @Option(help: "Altitude in metres.") var alt: Double?
    @Option(help: "Speed in m/s.") var spd: Double?
    @Option(help: "Heading in degrees, [0, 360).") var hdg: Double?
    @Option(help: "Battery percentage.") var batt: Double?

    /// Checked while the arguments are parsed, before connecting: a connection error must not hide a typo.
    func validate() throws {
        do { _ = try position() } catch { throw ValidationError(error.message) }
    }

    /// The position to send, checked with the relay's own rules.
    func position() throws(CLIError) -> Position {
        guard let point = Coordinate(parsing: coordinate) else { throw CLIError.usage("expected LAT,LON, e.g. 57.7089,11.9746") }
        var members: [(String, JSONValue)] = [("lat", .number(point.lat)), ("lon", .number(point.lon))]
        for (key, value) in [("acc", acc), ("alt", alt), ("spd", spd), ("hdg", hdg), ("batt", batt)] {
            if let value { members.append((key, .number(value))) }
        }
        members.append(("ts", .int(HumanFormat.nowMillis())))
        do { return try Position(from: .object(members), now: 0) } catch { throw CLIError(error) }
    }

    func execute(in context: CommandContext) async throws {
        let position = try position()
        try await context.call { () async throws(RelayClientError) in try await context.client.sendAcknowledged(position) }
        context.console.emit("sent \(HumanFormat.coordinate(position.lat, position.lon)) \(HumanFormat.details(position))",
                             json: .object([("type", "pos.sent")] + position.jsonMembers()))
    }
}
