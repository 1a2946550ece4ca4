import ArgumentParser
import HomewardClient
import HomewardProtocol

struct RegisterCommand: RelayCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Create an account and sign this profile in.",
        discussion: "Remembers the relay URL, the --ca file, the username and the token in the profile.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "3-32 characters of a-z 0-9 _ . -") var username: String
    @Option(help: "Display name (default: the username).") var name: String?
    @OptionGroup var password: PasswordOptions

    static var needsSignIn: Bool { false }

    /// Asks for the password before connecting (see `withContext`).
    func run() async throws {
        let credentials = try validatedCredentials()
        try await withContext { context in try await register(credentials, in: context) }
    }

    func execute(in context: CommandContext) async throws {
        try await register(try validatedCredentials(), in: context)
    }

    private func validatedCredentials() throws(CLIError) -> (username: String, password: String) {
        let normalized: String
        do { normalized = try Username.normalize(username) } catch { throw CLIError(error) }
        let secret = try password.resolve(confirm: true)
        do { try Username.validatePassword(secret) } catch { throw CLIError(error) }
        return (normalized, secret)
    }

    private func register(_ credentials: (username: String, password: String), in context: CommandContext) async throws {
        let (normalized, secret) = credentials
        let signIn = try await context.call { () async throws(RelayClientError) in
            try await context.client.register(username: normalized, password: secret, name: name)
        }
        try SignInRecorder.record(signIn, in: context)
        context.console.emit("registered \(signIn.user.username) (\(signIn.user.name)); profile \"\(context.profileName)\" is signed in",
                             json: ["type": "registered", "user": signIn.user.json, "profile": .string(context.profileName)])
    }
}

/// Saves a successful sign-in in the profile, with the relay and CA it was made against.
enum SignInRecorder {
    static func record(_ signIn: SignIn, in context: CommandContext) throws(CLIError) {
        let connection = context.connection
        try context.updateProfile { profile in
            profile.relay = connection.relayURL
            profile.ca = connection.caPath
            profile.username = signIn.user.username
            profile.token = signIn.token
        }
    }
}
