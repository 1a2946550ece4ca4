import ArgumentParser
import Foundation
import HomewardClient
import HomewardProtocol

struct WalkCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "walk",
        abstract: "Simulate walking: send a position every interval along a straight line or a GPX track.",
        discussion: """
            Walks from --from to --to along the great circle, or along --gpx, at --speed, sending a \
            position every --interval seconds with GPS noise of --accuracy metres (68 % radius). \
            Keeps walking through a lost connection and sends the newest position after reconnecting. \
            Write negative coordinates with =, e.g. --from=-33.92,18.42.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: ArgumentHelp("Start point.", valueName: "lat,lon")) var from: String?
    @Option(help: ArgumentHelp("End point.", valueName: "lat,lon")) var to: String?
    @Option(help: ArgumentHelp("Walk along this GPX track (its trkpt, or rtept) instead.", valueName: "file")) var gpx: String?
    @Option(help: "Walking speed in m/s (1.4 is a brisk walk).") var speed: Double = 1.4
    @Option(help: "Seconds between positions.") var interval: Double = 1
    @Option(help: "GPS accuracy in metres: positions are off by this much (68 % of the time) and say so in `acc`. 0 for exact positions.")
    var accuracy: Double = 5
    @Option(help: "Raise a panic alarm at this step (0-based) and keep walking.") var panicAt: Int?
    @Option(help: "The alarm's text.") var panicText: String?
    @Option(help: "Seed for the GPS noise, to repeat a walk exactly (default: random).") var seed: UInt64?
    @Flag(help: "Start a session inviting all friends first, unless one is active, and end it on arrival.")
    var share = false

    static var reconnects: Bool { true }

    func validate() throws {
        guard (gpx == nil) != (from == nil && to == nil) else {
            throw ValidationError("give either --from and --to, or --gpx")
        }
        if gpx == nil, from == nil || to == nil { throw ValidationError("--from and --to go together") }
        guard speed > 0, speed.isFinite else { throw ValidationError("--speed must be positive") }
        guard interval >= 0.01, interval.isFinite else { throw ValidationError("--interval must be at least 0.01 s") }
        guard accuracy >= 0, accuracy.isFinite else { throw ValidationError("--accuracy must be 0 or more") }
        // A straight line needs no file: its points and --panic-at are checked before connecting, where a
        // connection error would hide them.
        if gpx == nil {
            do { _ = try steps(along: route()) } catch { throw ValidationError(error.message) }
        }
    }

    /// The route's steps at --speed and --interval; --panic-at must name one of them.
    func steps(along route: Route) throws(CLIError) -> [RouteStep] {
        let steps = route.steps(speed: speed, interval: interval)
        if let panicAt, !(0..<steps.count).contains(panicAt) {
            throw CLIError.usage("--panic-at must be a step from 0 to \(steps.count - 1)")
        }
        return steps
    }

    func route() throws(CLIError) -> Route {
        do {
            if let gpx { return try GPXTrack.load(path: gpx).route }
            guard let start = from.flatMap(Coordinate.init(parsing:)), let end = to.flatMap(Coordinate.init(parsing:)) else {
                throw CLIError.usage("--from and --to must be LAT,LON, e.g. 57.7089,11.9746")
            }
            return try Route(points: [start, end])
        } catch let error as CLIError {
            throw error
        } catch let error as GPXError {
            throw CLIError.file(error.description)
        } catch {
            throw CLIError.usage("\(error)")
        }
    }

    func execute(in context: CommandContext) async throws {
        let route = try route()
        let steps = try steps(along: route)
        let walk = SimulatedWalk(steps: steps, speed: speed, interval: interval,
                                 noise: GPSNoise(accuracy: accuracy, seed: seed ?? UInt64.random(in: 0...UInt64.max)))
        let startedSession = share ? try await shareIfNeeded(in: context) : nil
        context.console.say("walking \(HumanFormat.metres(route.length)) at \(speed) m/s: \(steps.count) positions, one every \(interval) s")

        let printer = EventPrinter(console: context.console)
        let relayNotes = Task { [events = context.events] in
            // Tell the walker about reconnects and about anyone reacting to the walk.
            for await event in events {
                switch event.kind {
                case .connection: printer.printConnection(event)
                case .requestFailed, .event(.sessionAccepted), .event(.sessionLeft), .event(.alarmAcked), .event(.sessionEnded):
                    printer.print(event)
                default: break
                }
            }
        }
        defer { relayNotes.cancel() }

        let clock = ContinuousClock()
        let start = clock.now
        var walker = walk
        for step in steps {
            try await clock.sleep(until: start + .seconds(step.offset), tolerance: .milliseconds(5))
            let position = walker.position(for: step, at: HumanFormat.nowMillis())
            let delivery = await context.client.send(position)
            report(step, position, delivery, console: context.console)
            if step.index == panicAt {
                let raised = try await AlarmRaiser.raise(
                    AlarmRequest(text: panicText, lat: position.lat, lon: position.lon, acc: position.acc), in: context)
                context.console.emit(AlarmRaiser.describe(raised), json: AlarmRaiser.json(raised))
            }
        }
        // Requests are served in order: once the ping is answered every position has been relayed.
        try await context.call { () async throws(RelayClientError) in try await context.client.ping() }
        if let startedSession {
            try await context.call { () async throws(RelayClientError) in try await context.client.endSession(startedSession) }
            context.console.say("arrived; ended session \(startedSession)")
        }
        context.console.emit("arrived after \(HumanFormat.metres(route.length)) in \(steps.count) positions",
                             json: ["type": "walk.done", "steps": .int(Int64(steps.count)), "distance": .number(route.length.rounded())])
    }

    private func shareIfNeeded(in context: CommandContext) async throws(CLIError) -> String? {
        let list = try await context.call { () async throws(RelayClientError) in try await context.client.sessionList() }
        if let own = list.own {
            context.console.say("sharing with the active session \(own.id)")
            return nil
        }
        let session = try await context.call { () async throws(RelayClientError) in try await context.client.startSession() }
        context.console.emit("started session \(session.id); invited: \(session.invited.joined(separator: ", "))",
                             json: ["type": "session.started", "session": SessionText.json(session)])
        return session.id
    }

    private func report(_ step: RouteStep, _ position: Position, _ delivery: PositionDelivery, console: Console) {
        let queued = delivery == .deferred ? "  (offline: sent on reconnect)" : ""
        console.emit(
            "\(HumanFormat.now())  step \(step.index + 1)/\(step.count)  \(HumanFormat.coordinate(position.lat, position.lon))  "
                + "\(HumanFormat.details(position))  walked \(HumanFormat.metres(step.distance)), \(HumanFormat.metres(step.remaining)) to go\(queued)",
            json: .object([("type", "walk.step"), ("step", .int(Int64(step.index))), ("steps", .int(Int64(step.count)))]
                + position.jsonMembers()
                + [("walked", .number(step.distance.rounded())), ("remaining", .number(step.remaining.rounded())),
                   ("delivery", delivery == .sent ? "sent" : "deferred")]))
    }
}

/// Turns route steps into the positions a phone would report.
struct SimulatedWalk: Sendable {
    let steps: [RouteStep]
    let speed: Double
    let interval: Double
    var noise: GPSNoise

    mutating func position(for step: RouteStep, at time: Int64) -> Position {
        let fix = noise.perturb(step.coordinate)
        let moving = step.index > 0 && step.remaining > 0 || step.index == 0 && step.count > 1
        return Position(lat: fix.lat, lon: fix.lon, acc: noise.accuracy > 0 ? noise.accuracy : nil,
                        alt: step.elevation, spd: moving ? speed : 0,
                        hdg: step.heading.map { ($0 * 10).rounded() / 10 }.map { $0 >= 360 ? 0 : $0 }, ts: time)
    }
}
