/// Left-aligned columns separated by two spaces, for lists people read.
struct TextTable {
    var headers: [String]
    var rows: [[String]] = []

    init(_ headers: String...) {
        self.headers = headers
    }

    /// Cells often hold what other users wrote (names): printed escaped, see `HumanFormat.shown`.
    mutating func add(_ cells: String...) {
        rows.append(cells.map(HumanFormat.shown))
    }

    func render() -> String {
        let all = [headers] + rows
        let columns = all.map(\.count).max() ?? 0
        var widths = Array(repeating: 0, count: columns)
        for row in all {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        return all.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
