import ArgumentParser
import HomewardClient

/// A command that talks to the relay. `run()` connects (and signs in), calls `execute(in:)`,
/// and closes; the shell calls `execute(in:)` directly with its long-lived context.
protocol RelayCommand: AsyncParsableCommand {
    var global: GlobalOptions { get }
    /// False for the commands that sign in (register, login).
    static var needsSignIn: Bool { get }
    /// Long-running commands reconnect after losing the relay; one-shot commands fail instead.
    static var reconnects: Bool { get }
    func execute(in context: CommandContext) async throws
}

extension RelayCommand {
    static var needsSignIn: Bool { true }
    static var reconnects: Bool { false }

    func run() async throws {
        try await withContext { context in try await execute(in: context) }
    }

    /// Connects (and signs in), runs `body`, and closes. Commands that need a person at the terminal
    /// (a password typed twice) ask before calling this: the relay closes a connection that has not
    /// signed in within its authentication timeout (10 s by default).
    func withContext(_ body: (CommandContext) async throws -> Void) async throws {
        let context = try await CommandContext.open(global, signIn: Self.needsSignIn, reconnect: Self.reconnects)
        do {
            try await body(context)
        } catch {
            await context.close()
            throw error
        }
        await context.close()
    }
}
