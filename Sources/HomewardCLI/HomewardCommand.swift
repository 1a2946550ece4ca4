import ArgumentParser

/// `homeward`: the command-line client of the Homeward relay.
public struct HomewardCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "homeward",
        abstract: "Share your walk home with friends, follow theirs, and raise or answer panic alarms.",
        discussion: """
            Every command takes --relay, --ca, --insecure, --profile and --json. register and login remember \
            the relay, the CA file and the token in the profile (under $HOMEWARD_CONFIG_DIR, \
            $XDG_CONFIG_HOME/homeward or ~/.config/homeward, readable by you only), so later commands need none of them.
            """,
        subcommands: [
            RegisterCommand.self, LoginCommand.self, LogoutCommand.self, WhoamiCommand.self, SessionsCommand.self,
            FriendsCommand.self, ShareCommand.self, FollowCommand.self, WatchCommand.self,
            CheckinCommand.self, PosCommand.self, WalkCommand.self,
            PanicCommand.self, AckCommand.self, CancelCommand.self, ContactsCommand.self, PushCommand.self,
            PauseCommand.self, ResumeCommand.self, MeetCommand.self, MsgCommand.self,
            ShellCommand.self, SimCommand.self,
        ])

    /// Declared here too so that global options may also come before the subcommand:
    /// `homeward --json friends list` as well as `homeward friends list --json`.
    @OptionGroup public var global: GlobalOptions

    public init() {}
}
