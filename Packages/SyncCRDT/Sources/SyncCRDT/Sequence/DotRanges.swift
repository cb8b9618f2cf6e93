/// The counters of one replica seen by a sequence, as sorted disjoint half-open ranges.
///
/// A replica's own operations arrive in order, so this is almost always one range; operations relayed out of
/// order leave short-lived gaps.
struct DotRanges: Hashable, Sendable {
    private(set) var ranges: [Range<UInt64>] = []

    /// The highest counter seen (0 when none).
    var last: UInt64 { ranges.last.map { $0.upperBound - 1 } ?? 0 }

    /// The highest counter below which every counter was seen.
    var contiguous: UInt64 {
        guard let first = ranges.first, first.lowerBound == 1 else { return 0 }
        return first.upperBound - 1
    }

    var isEmpty: Bool { ranges.isEmpty }

    func contains(_ counter: UInt64) -> Bool {
        if let last = ranges.last, last.contains(counter) { return true }
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].upperBound <= counter {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low < ranges.count && ranges[low].contains(counter)
    }

    /// Whether every counter in `range` was seen.
    func covers(_ range: Range<UInt64>) -> Bool {
        guard !range.isEmpty else { return true }
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].upperBound <= range.lowerBound {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low < ranges.count && ranges[low].lowerBound <= range.lowerBound
            && ranges[low].upperBound >= range.upperBound
    }

    /// The parts of `range` not seen yet, in order.
    func missing(in range: Range<UInt64>) -> [Range<UInt64>] {
        var result: [Range<UInt64>] = []
        var next = range.lowerBound
        for seen in ranges where seen.upperBound > range.lowerBound {
            if seen.lowerBound >= range.upperBound { break }
            if seen.lowerBound > next { result.append(next..<seen.lowerBound) }
            next = max(next, seen.upperBound)
            if next >= range.upperBound { break }
        }
        if next < range.upperBound { result.append(next..<range.upperBound) }
        return result
    }

    mutating func insert(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        if let last = ranges.last {
            if last.upperBound == range.lowerBound {
                ranges[ranges.count - 1] = last.lowerBound..<range.upperBound
                return
            }
            if last.upperBound < range.lowerBound {
                ranges.append(range)
                return
            }
        } else {
            ranges.append(range)
            return
        }
        var merged = range
        var result: [Range<UInt64>] = []
        result.reserveCapacity(ranges.count + 1)
        var placed = false
        for existing in ranges {
            if existing.upperBound < merged.lowerBound {
                result.append(existing)
            } else if existing.lowerBound > merged.upperBound {
                if !placed {
                    result.append(merged)
                    placed = true
                }
                result.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        if !placed { result.append(merged) }
        ranges = result
    }
}
