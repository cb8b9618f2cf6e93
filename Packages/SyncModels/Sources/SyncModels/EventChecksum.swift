import Foundation

/// The checksum of one event, and the arithmetic of a scope's checksum (docs/PROTOCOL.md, "Checksums").
///
/// An event's checksum is a 32-bit hash of what identifies and carries it: its id, stream, type, schema
/// version, HLC, dot and payload bytes (its canonical JSON, as the log and the wire hold it). Not its `seq`
/// or `receivedAt`: a device computes it when it writes the event, before the server gives either.
///
/// A scope's checksum up to a position is the plain sum (an `Int64`) of the checksums of its events at or
/// below that position. A sum does not depend on order and can be split: a folded snapshot or a pruned range
/// carries the sum of the events it replaced (`Event.carries`), so the server and a device that hold the
/// same history, each compacted its own way, hold the same sum. With 32-bit terms an `Int64` sum is exact
/// for up to 2³¹ events, without wrapping (PostgreSQL's and SQLite's `sum` then agree with Swift's).
///
/// The hash is not cryptographic: it finds lost, duplicated and damaged rows, not a forger.
public enum EventChecksum {
    /// The checksum of an event with these fields and canonical payload bytes.
    public static func of(
        id: UUID, stream: String, type: String, schemaVersion: Int, hlc: HLCTimestamp, dot: Dot,
        payload: UnsafeRawBufferPointer
    ) -> Int64 {
        var hash = Hash()
        withUnsafeBytes(of: id.uuid) { hash.add($0) }
        hash.add(UInt64(truncatingIfNeeded: schemaVersion))
        hash.add(hlc.physical)
        hash.add(UInt64(hlc.counter))
        hash.add(hlc.node)
        hash.add(dot.replica.high)
        hash.add(dot.replica.low)
        hash.add(dot.counter)
        var stream = stream
        stream.withUTF8 { hash.add(UnsafeRawBufferPointer($0)) }
        var type = type
        type.withUTF8 { hash.add(UnsafeRawBufferPointer($0)) }
        hash.add(payload)
        return Int64(hash.finish())
    }

    /// The checksum of `event`, whose canonical payload bytes are `payload`.
    public static func of(_ event: Event, payload: Data) -> Int64 {
        payload.withUnsafeBytes { bytes in
            of(
                id: event.id.uuid, stream: event.stream, type: event.type, schemaVersion: event.schemaVersion,
                hlc: event.hlc, dot: event.dot, payload: bytes)
        }
    }

    /// What `event` adds to its scope's checksum: what it carries when it is a folded row, its own
    /// checksum otherwise.
    public static func contribution(of event: Event, payload: Data) -> Int64 {
        event.carries ?? of(event, payload: payload)
    }

    /// A 64-bit multiply-and-rotate hash over 8-byte words (little-endian, the tail zero-padded, each
    /// field's length mixed in so that fields cannot trade bytes), finished with MurmurHash3's `fmix64`; the
    /// checksum is the top 32 bits.
    struct Hash {
        private var state: UInt64 = 0x9E37_79B9_7F4A_7C15

        @inline(__always)
        mutating func add(_ word: UInt64) {
            state = (state ^ word) &* 0x0000_0100_0000_01B3
            state = (state << 31) | (state >> 33)
        }

        mutating func add(_ bytes: UnsafeRawBufferPointer) {
            add(UInt64(bytes.count))
            var offset = 0
            let count = bytes.count
            while offset + 8 <= count {
                add(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                offset += 8
            }
            if offset < count {
                var tail: UInt64 = 0
                for index in offset..<count { tail |= UInt64(bytes[index]) << (8 * UInt64(index - offset)) }
                add(tail)
            }
        }

        func finish() -> UInt32 {
            var value = state
            value ^= value >> 33
            value &*= 0xFF51_AFD7_ED55_8CCD
            value ^= value >> 33
            value &*= 0xC4CE_B9FE_1A85_EC53
            value ^= value >> 33
            return UInt32(truncatingIfNeeded: value >> 32)
        }
    }
}
