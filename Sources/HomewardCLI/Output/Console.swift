import Foundation
import HomewardProtocol
import Synchronization

/// Where the CLI writes: results on stdout, one line at a time and flushed at once (a script
/// or test reading a pipe sees each line as it happens), notes and the live status line on stderr.
public final class Console: Sendable {
    public let json: Bool
    /// Whether the status line is showing, and the shell's prompt; one lock, so a line written from an
    /// event task and the shell setting its prompt never interleave.
    private let screen = Mutex(Screen())

    private struct Screen {
        var statusShown = false
        /// Printed after each line when an interactive shell is waiting for input.
        var prompt: String?
    }

    /// Printed after each line when an interactive shell is waiting for input.
    var prompt: String? {
        get { screen.withLock { $0.prompt } }
        set { screen.withLock { $0.prompt = newValue } }
    }

    public init(json: Bool) {
        self.json = json
    }

    public static let stderrIsTerminal = isatty(STDERR_FILENO) == 1
    public static let stdinIsTerminal = isatty(STDIN_FILENO) == 1

    /// A result or event: `human` by default, `machine` as one JSON line with `--json`.
    func emit(_ human: @autoclosure () -> String, json machine: @autoclosure () -> JSONValue) {
        if json { line(JSONWriter.string(machine())) } else { line(human()) }
    }

    /// A line for humans only: skipped with `--json`.
    func say(_ text: @autoclosure () -> String) {
        if !json { line(text()) }
    }

    func line(_ text: String) {
        screen.withLock { screen in
            Self.clearStatus(&screen)
            // In the shell, an event may arrive while the prompt is showing: replace the prompt
            // line with the event, then show the prompt again below it.
            Self.write(screen.prompt.map { "\r\u{1B}[K" + text + "\n" + $0 } ?? text + "\n", to: STDOUT_FILENO)
        }
    }

    /// A note for the person at the terminal (progress, reconnects): stderr, also with `--json`.
    func note(_ text: String) {
        screen.withLock { screen in
            Self.clearStatus(&screen)
            Self.write(text + "\n", to: STDERR_FILENO)
        }
    }

    /// Rewrites the single live status line on a terminal; does nothing when stderr is not one.
    func status(_ text: String) {
        guard Self.stderrIsTerminal else { return }
        screen.withLock { screen in
            Self.write("\r\u{1B}[K" + text, to: STDERR_FILENO)
            screen.statusShown = true
        }
    }

    func endStatus() {
        screen.withLock { Self.clearStatus(&$0) }
    }

    /// Unbuffered: each line leaves the process when it is written.
    static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return  // a closed pipe: nobody is reading any more
            }
            bytes = bytes.dropFirst(written)
        }
    }

    private static func clearStatus(_ screen: inout Screen) {
        guard screen.statusShown else { return }
        write("\r\u{1B}[K", to: STDERR_FILENO)
        screen.statusShown = false
    }
}
