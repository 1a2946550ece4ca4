/// Characters that let text from another user change how a screen shows it: control characters
/// (NUL, ESC starting a terminal escape sequence, C1 controls such as CSI) and the bidirectional
/// embeddings, overrides and isolates that reorder what follows them ("Trojan Source").
public enum DisplayText {
    /// U+202A-202E (LRE RLE PDF LRO RLO) and U+2066-2069 (LRI RLI FSI PDI).
    public static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
    }

    /// C0 controls, DEL and C1 controls.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// What a name may not contain: any control character (a name has no use for a tab or a newline
    /// either) or a bidirectional control.
    public static func isUnsafeInName(_ scalar: Unicode.Scalar) -> Bool {
        isControl(scalar) || isBidiControl(scalar)
    }
}
