import Foundation

/// Where the CLI keeps its profiles: `$HOMEWARD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/homeward`,
/// else `~/.config/homeward`.
enum ConfigDirectory {
    static func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["HOMEWARD_CONFIG_DIR"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") { return xdg + "/homeward" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.config/homeward"
    }
}
