import ArgumentParser
import HomewardClient
import HomewardProtocol

struct FollowCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "follow",
        abstract: "Accept a friend's invitation and print their positions until the session ends.",
        discussion: """
            Without a session id, follows USERNAME's session (or the only one you are invited to), \
            waiting for the invitation if it has not come yet. Alarms and lost contact are printed too. \
            Reconnects by itself; exits 0 when the walker ends the session.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "Whose walk to follow.") var username: String?
    @Option(help: "A session id instead of a username.") var session: String?
    @Option(help: "Exit after this many positions.") var count: Int?
    @Option(help: "Exit with status 4 if the session has not ended after this many seconds (at most a week).") var timeout: Double?

    static var reconnects: Bool { true }

    func validate() throws { try Deadline.validate(timeout) }

    func execute(in context: CommandContext) async throws {
        let watchdog = context.isInteractive ? nil : Deadline.arm(timeout, console: context.console, what: "the followed session")
        defer { watchdog?.cancel() }
        let printer = EventPrinter(console: context.console)
        var events = context.events.makeAsyncIterator()
        let owner = username?.lowercased()

        let followed = try await choose(in: context, events: &events, owner: owner)
        let accepted: FollowMeSession
        var lastPosition: Position?
        do {
            let result = try await context.client.acceptSession(followed.id)
            accepted = result.session
            lastPosition = result.lastPosition
        } catch .rejected(let error) where error.code == .conflict {
            accepted = followed  // accepted earlier (another device, or before a restart)
        } catch {
            throw CLIError(error)
        }
        context.console.emit("following \(accepted.owner.username) (\(SessionText.summary(accepted)))",
                             json: ["type": "following", "session": SessionText.json(accepted), "position": lastPosition?.json ?? .null])
        if let lastPosition {
            printer.print(RelayEvent(.position(from: accepted.owner.username, lastPosition)))
        }
        if context.isInteractive { return }

        var positions = 0
        while let event = await events.next() {
            switch event.kind {
            case .event(.position):
                printer.print(event)
                positions += 1
                if let count, positions >= count { return }
            case .event(.sessionEnded(let id, _)) where id == accepted.id:
                printer.print(event)
                return
            case .event(.alarm), .event(.alarmAcked), .event(.alarmCancelled), .event(.sessionLost), .event(.sessionResumed),
                 .requestFailed:
                printer.print(event)
            case .connection(let change):
                printer.printConnection(event)
                switch change {
                case .signedOut(let reason):
                    throw CLIError(code: "unauthenticated", message: "signed out while following: \(reason)", exitCode: CLIError.Status.rejected)
                case .gaveUp:
                    throw CLIError(code: "connection", message: "lost the relay and gave up reconnecting", exitCode: CLIError.Status.connection)
                case .reconnected:
                    // A session.ended sent while we were away is not sent again: ask.
                    let list = try await context.call { () async throws(RelayClientError) in try await context.client.sessionList() }
                    if !list.following.contains(where: { $0.id == accepted.id }) {
                        context.console.emit("session \(accepted.id) ended while the connection was down",
                                             json: ["type": "session.ended", "sessionId": .string(accepted.id), "reason": "unknown"])
                        return
                    }
                default:
                    break
                }
            default:
                break
            }
        }
    }

    /// The session to follow: the one named, one already followed, an open invitation, or the next one to arrive.
    private func choose(in context: CommandContext, events: inout AsyncStream<RelayEvent>.Iterator,
                        owner: String?) async throws(CLIError) -> FollowMeSession {
        let list = try await context.call { () async throws(RelayClientError) in try await context.client.sessionList() }
        let known = list.following + list.invites
        func matches(_ candidate: FollowMeSession) -> Bool {
            if let session { return candidate.id == session }
            if let owner { return candidate.owner.username == owner }
            return true
        }
        let candidates = known.filter(matches)
        if candidates.count > 1, session == nil, owner == nil {
            let owners = candidates.map(\.owner.username).joined(separator: ", ")
            throw .usage("several walks to follow (\(owners)): name one, e.g. homeward follow \(candidates[0].owner.username)")
        }
        if let found = candidates.first { return found }
        let whom = session.map { "session \($0)" } ?? owner.map { "an invitation from \($0)" } ?? "an invitation"
        context.console.note("waiting for \(whom)...")
        while let event = await events.next() {
            if case .event(.sessionInvite(let invited)) = event.kind, matches(invited) { return invited }
        }
        throw CLIError(code: "connection", message: "the connection closed while waiting for \(whom)", exitCode: CLIError.Status.connection)
    }
}

struct WatchCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print every event as it happens: friend requests, invitations, positions, alarms, presence.",
        discussion: "Starts with what was waiting for you (pending requests, invitations, alarms). Reconnects by itself.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "Exit after this many events.") var count: Int?
    @Option(help: "Exit with status 4 after this many seconds (at most a week).") var timeout: Double?

    static var reconnects: Bool { true }

    func validate() throws { try Deadline.validate(timeout) }

    func execute(in context: CommandContext) async throws {
        if context.isInteractive {
            context.console.say("the shell already prints every event as it arrives")
            return
        }
        let watchdog = Deadline.arm(timeout, console: context.console, what: "watch")
        defer { watchdog?.cancel() }
        let printer = EventPrinter(console: context.console)
        context.console.note("watching as \(context.username); Ctrl-C to stop")
        var seen = 0
        for await event in context.events {
            if case .connection(let change) = event.kind {
                printer.printConnection(event)
                if case .signedOut(let reason) = change {
                    throw CLIError(code: "unauthenticated", message: "signed out: \(reason)", exitCode: CLIError.Status.rejected)
                }
                continue
            }
            printer.print(event)
            seen += 1
            if let count, seen >= count { return }
        }
    }
}
