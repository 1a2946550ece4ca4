import ArgumentParser
import HomewardClient
import HomewardProtocol

/// `homeward share always` and `homeward friends where`: the friends' map standing share (issue 15).
extension ShareCommand {
    struct Always: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "always",
            abstract: "Share your location at all times with chosen friends (replaces the list), or show whom you share with.",
            discussion: """
                With usernames, those friends (and only they) receive every position you send, session or not; the \
                list replaces the previous one. --stop shares with nobody. Without either, shows the list and your \
                pauses (homeward pause). Removing or blocking a friend ends sharing with them at once.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Friends to share with (repeat, or separate with commas).") var usernames: [String] = []
        @Flag(help: "Stop sharing with everyone.") var stop = false

        func execute(in context: CommandContext) async throws {
            let names = NameList.parse(usernames)
            if stop, !names.isEmpty { throw CLIError.usage("give usernames or --stop, not both") }
            let chosen: [String]? = stop ? [] : (names.isEmpty ? nil : names)
            let reply = try await context.call { () async throws(RelayClientError) in try await context.client.shareAlways(with: chosen) }
            context.console.emit(SharingText.summary(reply), json: .object([("type", "share.always")] + reply.fields))
        }
    }
}

extension FriendsCommand {
    struct Where: RelayCommand {
        static let configuration = CommandConfiguration(
            commandName: "where", abstract: "A friend's last position and its age, if they share their location with you at all times.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend.") var username: String

        func execute(in context: CommandContext) async throws {
            let reply = try await context.call { () async throws(RelayClientError) in
                try await context.client.friendLocation(username.lowercased())
            }
            let text: String
            if let position = reply.position {
                text = "\(reply.username) was at \(HumanFormat.coordinate(position.lat, position.lon)) "
                    + "\(((reply.age ?? 0) + 500) / 1000) s ago (fix \(HumanFormat.time(position.ts)))"
            } else {
                text = "\(reply.username) shares with you but has sent no position since the relay started"
            }
            context.console.emit(text, json: .object([("type", "friend.location")] + reply.fields))
        }
    }
}

/// How the CLI shows whom we share with and our pauses.
enum SharingText {
    static func summary(_ reply: LocationSharingReply) -> String {
        var lines = ["sharing at all times with: " + (reply.with.isEmpty ? "nobody" : reply.with.joined(separator: ", "))]
        for pause in reply.pauses {
            let until = pause.until.map { " until \(HumanFormat.time($0))" } ?? " until you resume"
            lines.append("paused for \(pause.from ?? "everyone")\(until)")
        }
        if let recipients = reply.alarmRecipients {
            lines.append("your active alarm still sends your position to: \(recipients.joined(separator: ", "))")
        }
        return lines.joined(separator: "\n")
    }
}
