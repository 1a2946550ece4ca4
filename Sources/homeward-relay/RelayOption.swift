import ArgumentParser
import Foundation

/// One option of the relay, stated once: its flag (`--NAME`), its variable (`HOMEWARD_NAME`), what it
/// does and its default. The `@Option` or `@Flag` that parses the flag is made from it, `--help` shows
/// the variable and the default from it, and `Environment.value(_:_:)` resolves it: the flag, else the
/// variable, else the default.
struct RelayOption<Value: LosslessStringConvertible>: Sendable {
    let name: String
    let abstract: String
    let valueName: String?
    /// What `--help` gives as the default; nil for an option that is simply off unless given.
    let defaultText: String?
    /// Left out of `--help`: a hook for the project's own fault tests, not an operator's setting.
    let hidden: Bool

    /// An option whose default is one value, read from the configuration type that holds it.
    init(_ name: String, _ abstract: String, valueName: String? = nil, default value: Value) {
        self.init(name, abstract, valueName: valueName, defaultText: Self.text(of: value))
    }

    /// An option whose default is not one value of its own: derived at start, or none (then `defaultText`
    /// says what happens without it).
    init(_ name: String, _ abstract: String, valueName: String? = nil, defaultText: String? = nil, hidden: Bool = false) {
        self.hidden = hidden
        self.name = name
        self.abstract = abstract
        self.valueName = valueName
        self.defaultText = defaultText
    }

    var variable: String { Environment.variable(for: name) }

    var help: ArgumentHelp {
        ArgumentHelp("\(abstract) [env: \(variable)]" + (defaultText.map { " [default: \($0)]" } ?? ""), valueName: valueName,
                     visibility: hidden ? .hidden : .default)
    }

    /// Seconds and days are Doubles: a whole number reads as one (`5`, not `5.0`).
    private static func text(of value: Value) -> String {
        if let number = value as? Double, number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
        return value.description
    }
}

extension Option {
    /// `@Option(RelayOptions.port) var port: Int?`: nil unless the flag is given.
    init<T: ExpressibleByArgument>(_ option: RelayOption<T>) where Value == T? {
        self.init(name: .customLong(option.name), help: option.help)
    }
}

extension Flag where Value == Bool {
    /// `@Flag(RelayOptions.pushAllowHTTP) var pushAllowHTTP = false`.
    init(wrappedValue: Bool, _ option: RelayOption<Bool>) {
        self.init(wrappedValue: wrappedValue, name: .customLong(option.name), help: option.help)
    }
}

/// The `HOMEWARD_*` variables, read for the options not given on the command line.
struct Environment {
    let values: [String: String]

    static var process: Environment { Environment(values: ProcessInfo.processInfo.environment) }

    /// `HOMEWARD_` and the option's name in capitals with `_` for `-`.
    static func variable(for option: String) -> String {
        "HOMEWARD_" + option.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The flag when given, else the option's variable when set and not empty, else nil: the default.
    /// - Throws: `ValidationError` naming the variable when its value is not one of the option's.
    func value<T>(_ flag: T?, _ option: RelayOption<T>) throws -> T? {
        if let flag { return flag }
        guard let raw = values[option.variable], !raw.isEmpty else { return nil }
        guard let parsed = T(raw) else {
            throw ValidationError("\(option.variable)='\(raw)' is not a valid value for --\(option.name)")
        }
        return parsed
    }

    /// Replaces `setting` (its default) with the flag or variable of `option`, when one is given.
    func override<T>(_ setting: inout T, _ flag: T?, _ option: RelayOption<T>) throws {
        if let given = try value(flag, option) { setting = given }
    }
}
