import ArgumentParser
import HomewardClient

struct LoginCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "login", abstract: "Sign this profile in to an existing account.")

    @OptionGroup var global: GlobalOptions
    @Argument var username: String
    @OptionGroup var password: PasswordOptions

    static var needsSignIn: Bool { false }

    /// Asks for the password before connecting (see `withContext`).
    func run() async throws {
        let secret = try password.resolve(confirm: false)
        try await withContext { context in try await login(secret, in: context) }
    }

    func execute(in context: CommandContext) async throws {
        try await login(try password.resolve(confirm: false), in: context)
    }

    private func login(_ secret: String, in context: CommandContext) async throws {
        let signIn = try await context.call { () async throws(RelayClientError) in
            try await context.client.login(username: username.lowercased(), password: secret)
        }
        try SignInRecorder.record(signIn, in: context)
        context.console.emit("signed in as \(signIn.user.username) (\(signIn.user.name)) on profile \"\(context.profileName)\"",
                             json: ["type": "signedIn", "user": signIn.user.json, "profile": .string(context.profileName)])
    }
}

struct LogoutCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "Revoke this profile's token and forget it.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Sign out every device of the account (revokes all its tokens).") var all = false

    func execute(in context: CommandContext) async throws {
        try await context.call { () async throws(RelayClientError) in try await context.client.logout(all: all) }
        let name = context.username
        try context.updateProfile { $0.token = nil }
        context.console.emit("signed out \(name)\(all ? " on every device" : "") on profile \"\(context.profileName)\"",
                             json: ["type": "signedOut", "username": .string(name), "profile": .string(context.profileName),
                                    "all": .bool(all)])
    }
}

struct WhoamiCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "whoami", abstract: "Show who this profile is signed in as, and where.")

    @OptionGroup var global: GlobalOptions

    func execute(in context: CommandContext) async throws {
        let user = await context.client.user
        let relay = context.client.configuration.endpoint.url
        context.console.emit("\(user?.username ?? "?") (\(user?.name ?? "?")) on \(relay), profile \"\(context.profileName)\"",
                             json: ["type": "whoami", "user": user?.json ?? .null, "relay": .string(relay),
                                    "profile": .string(context.profileName)])
    }
}
