import Foundation

/// Durations counted in logarithmic buckets, eight to a doubling (each about 9 % wide), from 1 µs to
/// about 2 minutes: percentiles within that width, in a few hundred bytes for the buckets in use.
struct LatencyHistogram: Sendable {
    private(set) var buckets: [UInt16: Int] = [:]
    private(set) var count = 0

    static let bucketsPerDoubling = 8.0
    static let lastBucket: UInt16 = 8 * 27

    mutating func record(nanoseconds: Int64) {
        buckets[Self.bucket(of: nanoseconds), default: 0] += 1
        count += 1
    }

    mutating func merge(_ other: LatencyHistogram) {
        for (bucket, count) in other.buckets { buckets[bucket, default: 0] += count }
        count += other.count
    }

    /// The duration in milliseconds below which `fraction` (0...1) of the recorded ones fall, as the middle of
    /// its bucket; nil when nothing was recorded.
    func percentileMilliseconds(_ fraction: Double) -> Double? {
        guard count > 0 else { return nil }
        let rank = max(1, Int((fraction * Double(count)).rounded(.up)))
        var seen = 0
        for bucket in buckets.keys.sorted() {
            seen += buckets[bucket]!
            if seen >= rank { return Self.milliseconds(ofBucket: bucket) }
        }
        return Self.milliseconds(ofBucket: buckets.keys.max()!)
    }

    static func bucket(of nanoseconds: Int64) -> UInt16 {
        guard nanoseconds > 1000 else { return 0 }
        let index = (Double(nanoseconds) / 1000).log2 * bucketsPerDoubling
        return UInt16(min(Double(lastBucket), index.rounded(.down) + 1))
    }

    static func milliseconds(ofBucket bucket: UInt16) -> Double {
        guard bucket > 0 else { return 0.001 }
        let microseconds = (2.0).power((Double(bucket) - 0.5) / bucketsPerDoubling)
        return microseconds / 1000
    }
}

extension Double {
    fileprivate var log2: Double { Foundation.log2(self) }
    fileprivate func power(_ exponent: Double) -> Double { Foundation.pow(self, exponent) }
}
