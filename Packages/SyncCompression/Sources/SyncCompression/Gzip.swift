import CZlib
import Foundation

/// gzip (RFC 1952) compression and bounded decompression over the system zlib.
///
/// Decompression streams and stops as soon as the output would pass `maxOutputBytes`, so a small "gzip
/// bomb" never makes the process allocate more than the cap.
public enum Gzip {
    /// Why a gzip stream could not be decompressed.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public enum Kind: String, Sendable {
            /// Not gzip data, or corrupt.
            case corrupt
            /// The data ends before the gzip stream does.
            case truncated
            /// The decompressed data would be larger than the cap.
            case tooLarge
        }
        public var kind: Kind
        public init(kind: Kind) { self.kind = kind }
        public var description: String {
            switch kind {
            case .corrupt: "gzip.corrupt: not a valid gzip stream"
            case .truncated: "gzip.truncated: the gzip stream ends early"
            case .tooLarge: "gzip.tooLarge: the decompressed data exceeds its limit"
            }
        }
    }

    /// Whether `data` starts with the gzip magic bytes.
    public static func isGzip(_ data: Data) -> Bool {
        data.count >= 2 && data[data.startIndex] == 0x1f && data[data.startIndex + 1] == 0x8b
    }

    /// Compresses `data` as one gzip member.
    public static func compress(_ data: Data, level: Int32 = 6) -> Data {
        var stream = z_stream()
        // windowBits 15 + 16 selects the gzip wrapper.
        let initialized = deflateInit2_(
            &stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)
        )
        precondition(initialized == Z_OK, "deflateInit2 failed: \(initialized)")
        defer { deflateEnd(&stream) }
        var output = Data(count: Int(deflateBound(&stream, uLong(data.count))) + 32)
        let produced: Int = data.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(
                    mutating: input.bindMemory(to: Bytef.self).baseAddress ?? UnsafePointer(bitPattern: 1)!)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(out.count)
                let status = deflate(&stream, Z_FINISH)
                precondition(status == Z_STREAM_END, "deflate with a bound-sized buffer must finish: \(status)")
                return Int(stream.total_out)
            }
        }
        output.count = produced
        return output
    }

    /// A part of a body deflated ahead of time, to be sent later after a head written then
    /// (`compress(head:then:level:)`): raw deflate data ended by its final block, its bytes' CRC-32 and count.
    public struct Segment: Sendable, Hashable {
        public let deflated: [UInt8]
        public let crc: UInt32
        public let count: Int
    }

    /// Deflates `data` as the last part of a future gzip member (see `Segment`).
    public static func segment(_ data: [UInt8], level: Int32 = 6) -> Segment {
        let deflated = deflateRaw(data, level: level, flush: Z_FINISH)
        let crc = data.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
        return Segment(deflated: deflated, crc: crc, count: data.count)
    }

    /// One gzip member of `head` followed by `tail`'s bytes: `head` is deflated now and ended on a byte
    /// boundary without a final block (a sync flush), then `tail`'s blocks follow as they are, so the work
    /// of deflating `tail` was done when the segment was made. What it inflates to is `head` + `tail`'s bytes,
    /// as from `compress` (a deflate stream may be cut into independently deflated runs this way, as pigz
    /// does; the decompressor sees one member).
    public static func compress(head: [UInt8], then tail: Segment, level: Int32 = 6) -> Data {
        var output: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]
        if !head.isEmpty { output += deflateRaw(head, level: level, flush: Z_SYNC_FLUSH) }
        output.reserveCapacity(output.count + tail.deflated.count + 8)
        output += tail.deflated
        let headCRC = head.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) }
        let crc = UInt32(crc32_combine(headCRC, uLong(tail.crc), .init(tail.count)))
        let size = UInt32(truncatingIfNeeded: head.count + tail.count)
        for shift in stride(from: 0, to: 32, by: 8) { output.append(UInt8(truncatingIfNeeded: crc >> UInt32(shift))) }
        for shift in stride(from: 0, to: 32, by: 8) { output.append(UInt8(truncatingIfNeeded: size >> UInt32(shift))) }
        return Data(output)
    }

    /// All of `input` as raw deflate data (no wrapper: a member's header and trailer are written by
    /// `compress(head:then:)`), ended by `flush`: `Z_FINISH` (a final block) or `Z_SYNC_FLUSH` (a byte
    /// boundary, more blocks may follow).
    static func deflateRaw(_ input: [UInt8], level: Int32, flush: Int32) -> [UInt8] {
        var stream = z_stream()
        let initialized = deflateInit2_(
            &stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(initialized == Z_OK, "deflateInit2 failed: \(initialized)")
        defer { deflateEnd(&stream) }
        // The bound, plus room for a sync flush's empty stored block.
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 16)
        let produced = input.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                let status = deflate(&stream, flush)
                precondition(
                    flush == Z_FINISH ? status == Z_STREAM_END : status == Z_OK && stream.avail_out > 0,
                    "deflate with a bound-sized buffer must finish: \(status)")
                return out.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// Decompresses a gzip stream (several concatenated members are allowed).
    /// - Throws: `Gzip.Failure` — `.tooLarge` as soon as the output passes `maxOutputBytes`,
    ///   `.truncated` when the input ends mid-stream, `.corrupt` for anything else.
    public static func decompress(_ data: Data, maxOutputBytes: Int = .max) throws -> Data {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(kind: .corrupt)
        }
        defer { inflateEnd(&stream) }
        var output = Data()
        let chunkSize = 64 * 1024
        var chunk = [UInt8](repeating: 0, count: chunkSize)
        return try data.withUnsafeBytes { input -> Data in
            guard let base = input.bindMemory(to: Bytef.self).baseAddress, input.count > 0 else {
                throw Failure(kind: .truncated)
            }
            stream.next_in = UnsafeMutablePointer(mutating: base)
            stream.avail_in = uInt(input.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { buffer -> (Int32, Int) in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = uInt(chunkSize)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, chunkSize - Int(stream.avail_out))
                }
                if produced > 0 {
                    guard output.count + produced <= maxOutputBytes else { throw Failure(kind: .tooLarge) }
                    output.append(contentsOf: chunk[0..<produced])
                }
                switch status {
                case Z_STREAM_END:
                    if stream.avail_in == 0 { return output }
                    // Another gzip member follows.
                    guard inflateReset(&stream) == Z_OK else { throw Failure(kind: .corrupt) }
                case Z_OK:
                    continue
                case Z_BUF_ERROR:
                    if stream.avail_in == 0 { throw Failure(kind: .truncated) }
                    continue
                default:
                    throw Failure(kind: .corrupt)
                }
            }
        }
    }
}
