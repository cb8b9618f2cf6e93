import CZlib
import Foundation

/// Decompresses gzip data with the system zlib (the trace files are `.json.gz`).
public enum Gunzip {
    /// Why data could not be decompressed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var status: Int32
        public var description: String { "gzip.corrupt: zlib status \(status)" }
    }

    /// The decompressed bytes of `data` (one or more gzip members).
    public static func decompress(_ data: Data) throws -> Data {
        var stream = z_stream()
        var status = inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else { throw Failure(status: status) }
        defer { inflateEnd(&stream) }
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        try data.withUnsafeBytes { (input: UnsafeRawBufferPointer) in
            guard let base = input.bindMemory(to: Bytef.self).baseAddress else { throw Failure(status: Z_BUF_ERROR) }
            stream.next_in = UnsafeMutablePointer(mutating: base)
            stream.avail_in = uInt(input.count)
            repeat {
                let produced = chunk.withUnsafeMutableBufferPointer { buffer -> Int in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = uInt(buffer.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    return buffer.count - Int(stream.avail_out)
                }
                output.append(contentsOf: chunk[0..<produced])
                if status == Z_STREAM_END && stream.avail_in > 0 {
                    status = inflateReset(&stream)
                    continue
                }
                guard status == Z_OK || status == Z_STREAM_END else { throw Failure(status: status) }
            } while status != Z_STREAM_END
        }
        return output
    }
}
