import Foundation
import Histogram
import HomewardProtocol

/// The end-of-run summary of `homeward sim`.
struct SimulationReport: Sendable {
    var walkers: Int
    var watchersPerWalker: Int
    var rate: Double
    var duration: Double
    var connections: Int
    var totals: SimulationLedger.Totals
    var expectedDeliveries: Int
    var lost: Int
    var latency: Histogram<UInt64>
    var alarmLatency: Histogram<UInt64>
    var expectedAlarmDeliveries: Int
    /// From the first send to the last delivery.
    var deliveryWindow: Double
    var elapsed: Double
    var prefix: String

    var deliveriesPerSecond: Double { deliveryWindow > 0 ? Double(totals.delivered) / deliveryWindow : 0 }
    var alarmsLost: Int { max(0, expectedAlarmDeliveries - totals.alarmDeliveries) }
    var isClean: Bool { lost == 0 && totals.duplicates == 0 && alarmsLost == 0 }

    static let percentiles: [(String, Double)] = [("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)]

    private static func milliseconds(_ micros: UInt64) -> Double { (Double(micros) / 10).rounded() / 100 }

    private func latencyJSON(_ histogram: Histogram<UInt64>) -> JSONValue {
        guard histogram.totalCount > 0 else { return .null }
        var members: [(String, JSONValue)] = Self.percentiles.map { name, percentile in
            (name, .number(Self.milliseconds(histogram.valueAtPercentile(percentile))))
        }
        members.append(("max", .number(Self.milliseconds(histogram.max))))
        members.append(("mean", .number((histogram.mean / 10).rounded() / 100)))
        members.append(("count", .int(Int64(histogram.totalCount))))
        return .object(members)
    }

    var json: JSONValue {
        [
            "type": "sim.summary", "prefix": .string(prefix),
            "walkers": .int(Int64(walkers)), "watchersPerWalker": .int(Int64(watchersPerWalker)),
            "rateHz": .number(rate), "durationS": .number(duration), "connections": .int(Int64(connections)),
            "sent": .int(Int64(totals.sent)), "expectedDeliveries": .int(Int64(expectedDeliveries)),
            "delivered": .int(Int64(totals.delivered)), "lost": .int(Int64(lost)),
            "duplicated": .int(Int64(totals.duplicates)), "outOfOrder": .int(Int64(totals.outOfOrder)),
            "deliveriesPerSecond": .number((deliveriesPerSecond * 10).rounded() / 10),
            "latencyMs": latencyJSON(latency),
            "alarms": [
                "raised": .int(Int64(totals.alarmsRaised)), "expectedDeliveries": .int(Int64(expectedAlarmDeliveries)),
                "delivered": .int(Int64(totals.alarmDeliveries)), "lost": .int(Int64(alarmsLost)),
                "latencyMs": latencyJSON(alarmLatency),
            ],
            "errors": .int(Int64(totals.errors)), "reconnects": .int(Int64(totals.reconnects)),
            "elapsedS": .number((elapsed * 10).rounded() / 10), "clean": .bool(isClean),
        ]
    }

    var text: String {
        var table = TextTable("", "")
        table.add("walkers x watchers", "\(walkers) x \(watchersPerWalker) at \(rate) Hz for \(duration) s (\(connections) connections, users \(prefix)*)")
        table.add("positions sent", "\(totals.sent)")
        table.add("deliveries", "\(totals.delivered) of \(expectedDeliveries) expected, \(String(format: "%.1f", deliveriesPerSecond))/s")
        table.add("lost", "\(lost)")
        table.add("duplicated", "\(totals.duplicates)")
        table.add("out of order", "\(totals.outOfOrder)")
        if latency.totalCount > 0 {
            let parts = Self.percentiles.map { "\($0.0) \(format(latency.valueAtPercentile($0.1)))" }
            table.add("latency", (parts + ["max \(format(latency.max))"]).joined(separator: "  "))
        }
        if expectedAlarmDeliveries > 0 || totals.alarmsRaised > 0 {
            var alarms = "\(totals.alarmsRaised) raised, \(totals.alarmDeliveries) of \(expectedAlarmDeliveries) deliveries"
            if alarmLatency.totalCount > 0 { alarms += ", p50 \(format(alarmLatency.valueAtPercentile(50))) max \(format(alarmLatency.max))" }
            table.add("alarms", alarms)
        }
        table.add("errors", "\(totals.errors)")
        table.add("reconnects", "\(totals.reconnects)")
        table.add("result", isClean ? "OK: every position reached every watcher exactly once"
                                    : "FAILED: lost or duplicated deliveries")
        return table.render().split(separator: "\n").dropFirst().joined(separator: "\n")
    }

    private func format(_ micros: UInt64) -> String {
        String(format: "%.2f ms", Double(micros) / 1000)
    }
}
