/// The network faults a ``FaultProxy`` injects, all at once, in both directions of every connection.
///
/// Settings are read afresh for every chunk forwarded, so a change takes effect on connections already open.
/// Written and parsed as a spec: `latency=300ms jitter=100ms bandwidth=64KiB reset=0.2 reset-after=2048
/// blackhole=on`, pairs separated by spaces, commas, `&` or new lines; `none` (or an empty spec) is plain
/// forwarding. A spec replaces every setting: what it does not name is off.
public struct FaultSettings: Sendable, Equatable, CustomStringConvertible {
    /// Added to every chunk in each direction before it is forwarded; chunks keep their order.
    public var latency: Duration = .zero
    /// Each chunk's delay is `latency` plus a uniform draw in `-jitter...jitter` (never below zero).
    public var jitter: Duration = .zero
    /// Bytes per second per connection and direction; 0: no cap.
    public var bandwidth: Int = 0
    /// The share of connections reset (RST on both sides) after part of the upstream's response went through.
    public var resetProbability: Double = 0
    /// A reset connection forwards 1 to this many bytes of the upstream's response (a uniform draw) first.
    public var resetAfterMax: Int = 2048
    /// Connections are accepted and read, nothing is forwarded either way; lifting it resumes them.
    public var blackhole = false

    /// Plain forwarding.
    public static let none = FaultSettings()

    public init() {}

    /// Parses a spec (see the type's documentation); throws ``FaultSpecError`` naming the first bad pair.
    public init(spec: String) throws(FaultSpecError) {
        let separators: Set<Character> = [" ", ",", "&", "\n", "\r", "\t", ";"]
        for pair in spec.split(whereSeparator: { separators.contains($0) }) {
            if pair == "none" { continue }
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw FaultSpecError(pair: String(pair)) }
            let (key, value) = (parts[0].lowercased(), parts[1])
            switch key {
            case "latency", "delay": latency = try Self.duration(value, pair: pair)
            case "jitter": jitter = try Self.duration(value, pair: pair)
            case "bandwidth", "rate": bandwidth = try Self.bytes(value, pair: pair)
            case "reset":
                guard let p = Double(value), (0...1).contains(p) else { throw FaultSpecError(pair: String(pair)) }
                resetProbability = p
            case "reset-after":
                let bytes = try Self.bytes(value, pair: pair)
                guard bytes >= 1 else { throw FaultSpecError(pair: String(pair)) }
                resetAfterMax = bytes
            case "blackhole":
                switch value.lowercased() {
                case "on", "1", "true", "yes": blackhole = true
                case "off", "0", "false", "no": blackhole = false
                default: throw FaultSpecError(pair: String(pair))
                }
            default: throw FaultSpecError(pair: String(pair))
            }
        }
    }

    /// Whether any fault is injected (`reset-after` alone injects nothing).
    public var injectsAnything: Bool {
        latency > .zero || jitter > .zero || bandwidth > 0 || resetProbability > 0 || blackhole
    }

    /// The spec that parses back to these settings (`none` for plain forwarding).
    public var description: String {
        var pairs: [String] = []
        if latency > .zero { pairs.append("latency=\(Self.milliseconds(latency))ms") }
        if jitter > .zero { pairs.append("jitter=\(Self.milliseconds(jitter))ms") }
        if bandwidth > 0 { pairs.append("bandwidth=\(bandwidth)") }
        if resetProbability > 0 { pairs.append("reset=\(resetProbability)") }
        if resetAfterMax != 2048 { pairs.append("reset-after=\(resetAfterMax)") }
        if blackhole { pairs.append("blackhole=on") }
        return pairs.isEmpty ? "none" : pairs.joined(separator: " ")
    }

    /// `300ms`, `1.5s`, `250us`; a bare number is milliseconds.
    static func duration(_ text: String, pair: Substring) throws(FaultSpecError) -> Duration {
        let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("s", 1)]
        var number = text
        var scale = 1e-3
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = String(text.dropLast(suffix.count))
            scale = factor
            break
        }
        guard let value = Double(number), value >= 0, value.isFinite else { throw FaultSpecError(pair: String(pair)) }
        return .nanoseconds(Int64((value * scale * 1e9).rounded()))
    }

    /// `65536`, `64KiB`, `1MiB`, `64kB` (1,000 bytes), `1MB`.
    static func bytes(_ text: String, pair: Substring) throws(FaultSpecError) -> Int {
        let units: [(String, Double)] = [
            ("KiB", 1024), ("MiB", 1024 * 1024), ("kB", 1000), ("KB", 1000), ("MB", 1_000_000), ("B", 1),
        ]
        var number = text
        var scale = 1.0
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = String(text.dropLast(suffix.count))
            scale = factor
            break
        }
        guard let value = Double(number), value >= 0, value * scale < 1e15 else {
            throw FaultSpecError(pair: String(pair))
        }
        return Int((value * scale).rounded())
    }

    static func milliseconds(_ duration: Duration) -> String {
        let ms = Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
        return ms == ms.rounded() ? String(Int(ms)) : String(ms)
    }
}

/// A fault spec that does not parse: `pair` is the first `key=value` that is wrong.
public struct FaultSpecError: Error, Sendable, CustomStringConvertible {
    public let code = "fault.spec"
    public let pair: String
    public var description: String {
        "bad fault setting '\(pair)': use latency=300ms jitter=100ms bandwidth=64KiB reset=0.2 reset-after=2048 "
            + "blackhole=on|off, or none"
    }
}
