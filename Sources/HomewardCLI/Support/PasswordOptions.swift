import ArgumentParser
import Foundation

/// Where a password comes from, safest first: a prompt without echo, stdin, the environment,
/// and (visible to other local users in the process list) the command line.
struct PasswordOptions: ParsableArguments {
    @Flag(help: "Read the password from the first line of standard input.")
    var passwordStdin = false

    @Option(help: ArgumentHelp("The password. Visible in the process list: prefer the prompt, --password-stdin or $HOMEWARD_PASSWORD.", valueName: "password"))
    var password: String?

    func resolve(confirm: Bool) throws(CLIError) -> String {
        if passwordStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw .usage("--password-stdin: standard input has no password line")
            }
            return line
        }
        if let password { return password }
        if let password = Environment.value("HOMEWARD_PASSWORD") { return password }
        guard Console.stdinIsTerminal else {
            throw .usage("no password: use --password-stdin, $HOMEWARD_PASSWORD or --password")
        }
        let first = Self.prompt("Password: ")
        if confirm {
            guard Self.prompt("Repeat password: ") == first else { throw .usage("the passwords do not match") }
        }
        return first
    }

    /// Reads a line from the terminal with echo off.
    private static func prompt(_ text: String) -> String {
        Console.write(text, to: STDERR_FILENO)
        var saved = termios()
        let haveTerminal = tcgetattr(STDIN_FILENO, &saved) == 0
        if haveTerminal {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        }
        let line = readLine(strippingNewline: true) ?? ""
        if haveTerminal {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            Console.write("\n", to: STDERR_FILENO)
        }
        return line
    }
}
