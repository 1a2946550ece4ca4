import ArgumentParser
import Foundation
import HomewardClient

struct ShellCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell",
        abstract: "An interactive shell: type the same commands without `homeward`; events print as they arrive.",
        discussion: """
            One connection serves every command typed, and reconnects by itself. `walk` runs in the \
            background (`stop` ends it); `follow` accepts the invitation and returns, since positions are \
            printed anyway. Type `help` for the commands, `exit` or Ctrl-D to leave.
            """)

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let profile = try ProfileStore().load(global.profileName)
        let context = try await CommandContext.open(global, signIn: profile.token != nil, reconnect: true, interactive: true)
        let console = context.console
        let interactive = Console.stdinIsTerminal
        let prompt = "homeward> "
        if interactive { console.prompt = prompt }

        let printer = EventPrinter(console: console)
        let eventTask = Task {
            for await event in context.events {
                if case .connection = event.kind { printer.printConnection(event) } else { printer.print(event) }
            }
        }
        let who = await context.client.user?.username
        console.say(who.map { "signed in as \($0) on \(context.connection.relayURL); type help, or exit" }
                    ?? "connected to \(context.connection.relayURL), not signed in: register or login; type help, or exit")
        if interactive { Console.write(prompt, to: STDOUT_FILENO) }

        var background: [Task<Void, Never>] = []
        for await line in LineReader.standardInput() {
            let keepGoing = await handle(line, context: context, background: &background)
            if !keepGoing { break }
            if interactive { Console.write(prompt, to: STDOUT_FILENO) }
        }
        console.prompt = nil
        for task in background { task.cancel() }
        for task in background { await task.value }
        eventTask.cancel()
        await context.close()
    }

    /// Runs one typed line; false to leave the shell.
    private func handle(_ line: String, context: CommandContext, background: inout [Task<Void, Never>]) async -> Bool {
        let console = context.console
        let arguments: [String]
        do { arguments = try ShellTokenizer.split(line) } catch {
            console.note("unterminated quote")
            return true
        }
        guard let first = arguments.first else { return true }
        switch first {
        case "exit", "quit": return false
        case "help", "?":
            console.note(HomewardCommand.helpMessage(for: arguments.count > 1 ? Self.subcommand(arguments[1]) : HomewardCommand.self))
            console.note("shell only: stop (end background walks), exit")
            return true
        case "stop":
            background.removeAll { task in
                task.cancel()
                return true
            }
            console.note("stopped background walks")
            return true
        case "shell", "sim":
            console.note("\(first) is not available inside the shell")
            return true
        default:
            break
        }
        let command: any ParsableCommand
        do {
            command = try HomewardCommand.parseAsRoot(arguments)
        } catch {
            console.note(HomewardCommand.message(for: error))
            return true
        }
        guard let relayCommand = command as? any RelayCommand else {
            console.note("\(first): not a command that can run here (try help)")
            return true
        }
        if relayCommand is WalkCommand {
            background.removeAll { $0.isCancelled }
            background.append(Task { await Self.execute(relayCommand, in: context) })
            console.note("walking in the background; `stop` ends it")
            return true
        }
        await Self.execute(relayCommand, in: context)
        return true
    }

    private static func execute(_ command: any RelayCommand, in context: CommandContext) async {
        do {
            try await command.execute(in: context)
        } catch is CancellationError {
            context.console.note("stopped")
        } catch {
            let failure = ErrorReporter.cliError(error) ?? CLIError(code: "error", message: "\(error)", exitCode: 1)
            ErrorReporter.report(failure, json: context.console.json)
        }
    }

    private static func subcommand(_ name: String) -> ParsableCommand.Type {
        HomewardCommand.configuration.subcommands.first { $0.configuration.commandName == name } ?? HomewardCommand.self
    }
}
