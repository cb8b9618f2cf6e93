import Logging
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// How the server writes its log: swift-log's text lines (`text`, the default) or one JSON object per line
/// (`json`, `JSONLogHandler`). `SYNC_LOG_FORMAT` or `--log-format`.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json

    /// Whether `bootstrap` has set the process's handler.
    private static let bootstrapped = Atomic<Bool>(false)

    /// Makes every logger of the process write in this format to standard error: call it before any logger
    /// is made (a logger made before keeps its handler). `text` leaves swift-log's default handler in place.
    /// Only the first call that changes the handler does so: swift-log allows one bootstrap per process.
    public func bootstrap() {
        guard self == .json, !Self.bootstrapped.exchange(true, ordering: .relaxed) else { return }
        let output = JSONLogHandler.Output.standardError
        LoggingSystem.bootstrap { label in
            JSONLogHandler(label: label, output: output, metadataProvider: LoggingSystem.metadataProvider)
        }
    }
}

/// A swift-log handler that writes each message as one line of JSON, for log collectors.
///
/// The packages this server builds on have no JSON log handler, and swift-log's own `StreamLogHandler` writes
/// text only; this one is small and has no dependency. Each line is an object with `time` (UTC, ISO 8601 with
/// milliseconds), `level`, `label`, `message` and `source`, then the metadata (the handler's, its provider's,
/// then the message's, each overriding the one before), one key each, sorted. A metadata key that is one of
/// the five fields is written as `metadata.KEY`. A dictionary value is written as an object, an array as an
/// array; a value given as an integer, a floating-point number or a Boolean (`.stringConvertible`) as a JSON
/// number or Boolean (a number that is not finite as `null`); anything else as a string.
///
/// Strings are escaped as JSON requires: quotes, backslashes and control characters (as `\n`, `\r`, `\t` or
/// `\u00XX`, and DEL as `\u007f`), and U+2028 and U+2029, which some readers take for line ends. Swift strings
/// hold valid Unicode only (bytes that were not UTF-8 became U+FFFD when the string was made), so every line
/// is valid UTF-8 and one line however many line breaks the message holds.
///
/// A line is built whole, then handed to `Output` in one call; `standardError` writes it with one `write(2)`
/// under a lock, so lines of different threads never interleave. Loggers filter by level before calling a
/// handler, and swift-log evaluates a message and its metadata only then: a message below the level costs
/// no encoding.
public struct JSONLogHandler: LogHandler {
    /// Where the lines go: `write` is given each line, newline included.
    public struct Output: Sendable {
        public var write: @Sendable ([UInt8]) -> Void

        public init(write: @escaping @Sendable ([UInt8]) -> Void) {
            self.write = write
        }

        /// The process's standard error, one `write(2)` per line (more only if the kernel takes part of it),
        /// under a lock shared by every handler of the process.
        public static let standardError = Output { line in
            standardErrorLock.withLock { _ in
                line.withUnsafeBytes { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let written = systemWrite(2, bytes.baseAddress! + offset, bytes.count - offset)
                        if written > 0 {
                            offset += written
                        } else if written < 0 && errno == EINTR {
                            continue
                        } else {
                            return
                        }
                    }
                }
            }
        }

        private static let standardErrorLock = Mutex(())
    }

    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let output: Output

    public init(label: String, output: Output, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.output = output
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let own = event.metadata { fields.merge(own) { $1 } }
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: #"{"time":""#.utf8)
        Self.appendTime(to: &line)
        line.append(contentsOf: #"","level":"#.utf8)
        Self.appendString(event.level.rawValue, to: &line)
        line.append(contentsOf: #","label":"#.utf8)
        Self.appendString(label, to: &line)
        line.append(contentsOf: #","message":"#.utf8)
        Self.appendString(event.message.description, to: &line)
        line.append(contentsOf: #","source":"#.utf8)
        Self.appendString(event.source, to: &line)
        for key in fields.keys.sorted() {
            line.append(UInt8(ascii: ","))
            Self.appendString(Self.reserved.contains(key) ? "metadata." + key : key, to: &line)
            line.append(UInt8(ascii: ":"))
            Self.appendValue(fields[key]!, to: &line)
        }
        line.append(contentsOf: "}\n".utf8)
        output.write(line)
    }

    /// The fields every line has, which metadata keys must not repeat.
    static let reserved: Set<String> = ["time", "level", "label", "message", "source"]

    /// A metadata value as JSON.
    static func appendValue(_ value: Logger.Metadata.Value, to line: inout [UInt8]) {
        switch value {
        case .string(let string):
            appendString(string, to: &line)
        case .stringConvertible(let convertible):
            switch convertible {
            case let bool as Bool:
                line.append(contentsOf: (bool ? "true" : "false").utf8)
            case is Int, is Int64, is Int32, is Int16, is Int8, is UInt, is UInt64, is UInt32, is UInt16, is UInt8:
                line.append(contentsOf: convertible.description.utf8)
            case let double as Double:
                line.append(contentsOf: (double.isFinite ? double.description : "null").utf8)
            case let float as Float:
                line.append(contentsOf: (float.isFinite ? float.description : "null").utf8)
            default:
                appendString(convertible.description, to: &line)
            }
        case .dictionary(let dictionary):
            line.append(UInt8(ascii: "{"))
            for (index, key) in dictionary.keys.sorted().enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                appendString(key, to: &line)
                line.append(UInt8(ascii: ":"))
                appendValue(dictionary[key]!, to: &line)
            }
            line.append(UInt8(ascii: "}"))
        case .array(let array):
            line.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                appendValue(element, to: &line)
            }
            line.append(UInt8(ascii: "]"))
        }
    }

    /// `string` as a JSON string, quotes included.
    static func appendString(_ string: String, to line: inout [UInt8]) {
        line.append(UInt8(ascii: "\""))
        for scalar in string.unicodeScalars {
            switch scalar.value {
            case 0x22: line.append(contentsOf: #"\""#.utf8)
            case 0x5C: line.append(contentsOf: #"\\"#.utf8)
            case 0x0A: line.append(contentsOf: #"\n"#.utf8)
            case 0x0D: line.append(contentsOf: #"\r"#.utf8)
            case 0x09: line.append(contentsOf: #"\t"#.utf8)
            case 0x00..<0x20, 0x7F, 0x2028, 0x2029:
                line.append(contentsOf: #"\u"#.utf8)
                let hex = Array("0123456789abcdef".utf8)
                for shift in stride(from: 12, through: 0, by: -4) {
                    line.append(hex[Int((scalar.value >> UInt32(shift)) & 0xF)])
                }
            case 0x20..<0x80:
                line.append(UInt8(scalar.value))
            default:
                line.append(contentsOf: UTF8.encode(scalar)!)
            }
        }
        line.append(UInt8(ascii: "\""))
    }

    /// The current time as `2026-12-02T07:15:04.123Z`.
    static func appendTime(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                line.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        line.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        line.append(UInt8(ascii: "."))
        digits(Int(now.tv_nsec) / 1_000_000, 3)
        line.append(UInt8(ascii: "Z"))
    }
}

/// `write(2)`, named apart from `Output.write`.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
