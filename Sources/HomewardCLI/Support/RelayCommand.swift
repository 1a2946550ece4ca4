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
        let context = try await CommandContext.open(global, signIn: Self.needsSignIn, reconnect: Self.reconnects)
        do {
            try await execute(in: context)
        } catch {
            await context.close()
            throw error
        }
        await context.close()
    }
}
