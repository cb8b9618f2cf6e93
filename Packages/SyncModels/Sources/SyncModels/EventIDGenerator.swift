/// The pure state of a UUIDv7 generator that is strictly monotonic on one replica.
///
/// Uses RFC 9562's "fixed-length dedicated counter" method: the 12 `rand_a` bits count ids made within one
/// millisecond, starting from a random value below 2048 so there is room to count up. When the counter is
/// exhausted, or the wall clock goes backwards, the generator carries on from its own last millisecond + 1
/// ("virtual" time) rather than ever issuing a smaller id.
public struct EventIDGenerator: Sendable {
    private var lastMilliseconds: UInt64 = 0
    private var counter: UInt16 = 0

    public init() {}

    /// The next id; strictly greater (bytewise) than every id this generator issued before.
    public mutating func next<G: RandomNumberGenerator>(wall: UInt64, using random: inout G) -> EventID {
        let wall = wall & 0xFFFF_FFFF_FFFF
        if wall > lastMilliseconds {
            lastMilliseconds = wall
            counter = UInt16.random(in: 0..<2048, using: &random)
        } else if counter < 0x0FFF {
            counter += 1
        } else {
            lastMilliseconds += 1
            counter = UInt16.random(in: 0..<2048, using: &random)
        }
        let randomBits: UInt64 = random.next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 {
            bytes[index] = UInt8(truncatingIfNeeded: lastMilliseconds >> (8 * (5 - index)))
        }
        bytes[6] = 0x70 | UInt8(counter >> 8)
        bytes[7] = UInt8(truncatingIfNeeded: counter)
        bytes[8] = 0x80 | UInt8(truncatingIfNeeded: randomBits >> 56) & 0x3F
        for index in 9..<16 {
            bytes[index] = UInt8(truncatingIfNeeded: randomBits >> (8 * (15 - index)))
        }
        let uuid = (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
        )
        return EventID(uuid: .init(uuid: uuid))
    }

    /// The next id with the system's random number generator.
    public mutating func next(wall: UInt64) -> EventID {
        var random = SystemRandomNumberGenerator()
        return next(wall: wall, using: &random)
    }
}
