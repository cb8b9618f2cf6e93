import Foundation

#if canImport(Glibc)
    import Glibc
    private let readDescriptor = Glibc.read
#elseif canImport(Darwin)
    import Darwin
    private let readDescriptor = Darwin.read
#endif

extension FileHandle {
    /// Everything the handle yields until end of file, read with `read(2)` and retried when a signal
    /// interrupts it. Foundation's `readDataToEndOfFile()` on Linux traps on `EINTR` (a `try!` inside it),
    /// which took a whole test run down once a child process's exit interrupted the read.
    public func readAllRetryingInterrupts() -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let descriptor = fileDescriptor
        while true {
            let count = buffer.withUnsafeMutableBytes { readDescriptor(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count == 0 || errno != EINTR {
                return data
            }
        }
    }
}
