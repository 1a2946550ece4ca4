/// Splits a typed line into arguments the way a POSIX shell would for simple cases: spaces
/// separate, single and double quotes group, a backslash escapes the next character.
enum ShellTokenizer {
    struct UnterminatedQuote: Error {}

    static func split(_ line: String) throws(UnterminatedQuote) -> [String] {
        var arguments: [String] = []
        var current = ""
        var inArgument = false
        var quote: Character?
        var escaped = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            if character == "\\" && quote != "'" {
                escaped = true
                inArgument = true
                continue
            }
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
                continue
            }
            switch character {
            case "'", "\"":
                quote = character
                inArgument = true
            case " ", "\t":
                if inArgument { arguments.append(current) }
                current = ""
                inArgument = false
            default:
                current.append(character)
                inArgument = true
            }
        }
        guard quote == nil, !escaped else { throw UnterminatedQuote() }
        if inArgument { arguments.append(current) }
        return arguments
    }
}
