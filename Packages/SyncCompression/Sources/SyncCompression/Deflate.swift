import CZlib
import Foundation

/// Raw deflate (RFC 1951, no gzip or zlib wrapper) of small values kept compressed at rest, such as the
/// server's folded history, where the wrapper's header and checksum would be a tenth of each value.
public enum Deflate {
    /// `input` deflated, ended by a final block.
    public static func compress(_ input: [UInt8], level: Int32 = 6) -> [UInt8] {
        Gzip.deflateRaw(input, level: level, flush: Z_FINISH)
    }

    /// The bytes `input` (raw deflate data, as `compress` makes it) inflates to.
    /// - Throws: `Gzip.Failure` — `.tooLarge` as soon as the output passes `maxOutputBytes`, `.truncated` when
    ///   the data ends before its final block, `.corrupt` for anything else.
    public static func decompress(_ input: some Collection<UInt8>, maxOutputBytes: Int = .max) throws -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Gzip.Failure(kind: .corrupt)
        }
        defer { inflateEnd(&stream) }
        let bytes = Array(input)
        guard !bytes.isEmpty else { throw Gzip.Failure(kind: .truncated) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count * 3)
        var chunk = [UInt8](repeating: 0, count: max(4096, bytes.count * 4))
        return try bytes.withUnsafeBufferPointer { input -> [UInt8] in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress!)
            stream.avail_in = uInt(input.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { buffer -> (Int32, Int) in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = uInt(buffer.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, buffer.count - Int(stream.avail_out))
                }
                if produced > 0 {
                    guard output.count + produced <= maxOutputBytes else { throw Gzip.Failure(kind: .tooLarge) }
                    output.append(contentsOf: chunk[0..<produced])
                }
                switch status {
                case Z_STREAM_END:
                    return output
                case Z_OK:
                    continue
                case Z_BUF_ERROR:
                    if stream.avail_in == 0 { throw Gzip.Failure(kind: .truncated) }
                    continue
                default:
                    throw Gzip.Failure(kind: .corrupt)
                }
            }
        }
    }
}
