/// An adaptive binary range coder (the design LZMA uses): each bit is coded against an 11-bit probability
/// that adapts as bits go by, so skewed decisions (the same kind of edit again, a position right at the cursor)
/// cost a fraction of a bit. Integers are coded by `AdaptiveInteger`.
struct RangeEncoder {
    private(set) var bytes: [UInt8] = []
    private var low: UInt64 = 0
    private var range: UInt32 = 0xFFFF_FFFF
    private var cache: UInt8 = 0
    private var cacheSize = 1

    static let probabilityBits: UInt32 = 11
    static let half: UInt16 = 1 << 10

    mutating func encode(_ bit: Bool, _ probability: inout UInt16) {
        let bound = (range >> Self.probabilityBits) &* UInt32(probability)
        if bit {
            low &+= UInt64(bound)
            range &-= bound
            probability &-= probability >> 5
        } else {
            range = bound
            probability &+= (2048 &- probability) >> 5
        }
        while range < 1 << 24 {
            range <<= 8
            shiftLow()
        }
    }

    /// Codes the low `count` bits of `value` with probability one half each.
    mutating func encodeDirect(_ value: UInt64, count: Int) {
        for shift in stride(from: count - 1, through: 0, by: -1) {
            range >>= 1
            if (value >> UInt64(shift)) & 1 == 1 { low &+= UInt64(range) }
            while range < 1 << 24 {
                range <<= 8
                shiftLow()
            }
        }
    }

    private mutating func shiftLow() {
        if low < 0xFF00_0000 || low > 0xFFFF_FFFF {
            let carry = UInt8(truncatingIfNeeded: low >> 32)
            var byte = cache
            repeat {
                bytes.append(byte &+ carry)
                byte = 0xFF
                cacheSize -= 1
            } while cacheSize != 0
            cache = UInt8(truncatingIfNeeded: low >> 24)
        }
        cacheSize += 1
        low = (low & 0x00FF_FFFF) << 8
    }

    /// Flushes the coder and returns every byte.
    mutating func finish() -> [UInt8] {
        for _ in 0..<5 { shiftLow() }
        return bytes
    }
}

/// Decodes what `RangeEncoder` wrote. Reading past the end yields zero bits and sets `overran`, so corrupt
/// input ends in an error, never a crash.
struct RangeDecoder {
    private let bytes: ArraySlice<UInt8>
    private var position: Int
    private var range: UInt32 = 0xFFFF_FFFF
    private var code: UInt32 = 0
    private(set) var overran = false

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        position = bytes.startIndex
        for _ in 0..<5 { code = code << 8 | UInt32(nextByte()) }
    }

    private mutating func nextByte() -> UInt8 {
        guard position < bytes.endIndex else {
            overran = true
            return 0
        }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func decode(_ probability: inout UInt16) -> Bool {
        let bound = (range >> RangeEncoder.probabilityBits) &* UInt32(probability)
        let bit: Bool
        if code < bound {
            range = bound
            probability &+= (2048 &- probability) >> 5
            bit = false
        } else {
            code &-= bound
            range &-= bound
            probability &-= probability >> 5
            bit = true
        }
        while range < 1 << 24 {
            range <<= 8
            code = code << 8 | UInt32(nextByte())
        }
        return bit
    }

    mutating func decodeDirect(count: Int) -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<count {
            range >>= 1
            var bit: UInt64 = 0
            if code >= range {
                code &-= range
                bit = 1
            }
            value = value << 1 | bit
            while range < 1 << 24 {
                range <<= 8
                code = code << 8 | UInt32(nextByte())
            }
        }
        return value
    }
}

/// An adaptive code for non-negative integers: the bit length of `n + 1` in unary (each step its own adaptive
/// probability), then its top bits below the leading one through an adaptive bit tree, the rest direct. Small
/// and frequent values cost little; any 64-bit value can be coded.
///
/// The probability tables grow with the longest length coded so far (an entry never reached keeps its initial
/// probability, so this codes exactly as full tables would): a model is made for every list encoded, and full
/// tables of every length cost more to allocate and fill than encoding a small list.
struct AdaptiveInteger {
    private static let treeBits = 4
    private var lengths: [UInt16] = []
    private var trees: [UInt16] = []

    /// Makes the tables cover bit length `length` (0...64).
    private mutating func reserve(_ length: Int) {
        if lengths.count <= length {
            lengths.append(contentsOf: repeatElement(RangeEncoder.half, count: length + 1 - lengths.count))
        }
        let needed = (length + 1) << Self.treeBits
        if trees.count < needed {
            trees.append(contentsOf: repeatElement(RangeEncoder.half, count: needed - trees.count))
        }
    }

    mutating func encode(_ value: UInt64, with encoder: inout RangeEncoder) {
        let shifted = value &+ 1
        let length = shifted == 0 ? 64 : 63 - shifted.leadingZeroBitCount  // bits below the leading one
        reserve(length)
        for step in 0..<length { encoder.encode(true, &lengths[step]) }
        if length < 64 { encoder.encode(false, &lengths[length]) }
        let treed = min(length, Self.treeBits)
        var node = 1
        for shift in stride(from: length - 1, through: length - treed, by: -1) where treed > 0 {
            let bit = (shifted >> UInt64(shift)) & 1 == 1
            encoder.encode(bit, &trees[length << Self.treeBits + node])
            node = node << 1 | (bit ? 1 : 0)
        }
        if length > treed { encoder.encodeDirect(shifted, count: length - treed) }
    }

    mutating func decode(with decoder: inout RangeDecoder) -> UInt64 {
        var length = 0
        while length < 64 {
            reserve(length)
            guard decoder.decode(&lengths[length]) else { break }
            length += 1
        }
        reserve(length)
        let treed = min(length, Self.treeBits)
        var value: UInt64 = 1
        var node = 1
        for _ in 0..<treed {
            let bit = decoder.decode(&trees[length << Self.treeBits + node])
            node = node << 1 | (bit ? 1 : 0)
            value = value << 1 | (bit ? 1 : 0)
        }
        if length > treed {
            let rest = length - treed
            value = value << UInt64(rest) | decoder.decodeDirect(count: rest)
        }
        return value &- 1
    }
}

/// An adaptive code for signed integers: a sign bit (adaptive) and the magnitude (`AdaptiveInteger`).
struct AdaptiveSigned {
    private var sign = RangeEncoder.half
    private var magnitude = AdaptiveInteger()

    mutating func encode(_ value: Int64, with encoder: inout RangeEncoder) {
        encoder.encode(value < 0, &sign)
        magnitude.encode(value < 0 ? UInt64(bitPattern: ~value) : UInt64(value), with: &encoder)
    }

    mutating func decode(with decoder: inout RangeDecoder) -> Int64 {
        let negative = decoder.decode(&sign)
        let magnitude = magnitude.decode(with: &decoder)
        return negative ? ~Int64(bitPattern: magnitude) : Int64(bitPattern: magnitude)
    }
}
