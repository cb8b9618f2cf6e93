/// A body's `Content-Encoding` as protocol v1 understands it: none (`identity`) or `gzip`.
public enum ContentCoding: String, Hashable, Sendable {
    case identity
    case gzip

    /// Parses a `Content-Encoding` header value (absent or empty is `identity`; case-insensitive).
    /// - Throws: `SyncProtocolError` `request.unsupportedEncoding` for anything else, including stacked
    ///   encodings such as `gzip, gzip`.
    public init(header: String?) throws(SyncProtocolError) {
        let value = (header ?? "").trimmingWhitespace().lowercased()
        switch value {
        case "", "identity": self = .identity
        case "gzip", "x-gzip": self = .gzip
        default: throw SyncProtocolError(.requestUnsupportedEncoding, "Content-Encoding must be gzip or identity")
        }
    }

    /// The most bytes of a body in this coding the server reads off the wire.
    public func maxWireBytes(_ limits: ProtocolLimits) -> Int {
        switch self {
        case .identity: limits.maxDecompressedBodyBytes
        case .gzip: limits.maxCompressedBodyBytes
        }
    }

    /// Whether an `Accept-Encoding` header value accepts gzip (`gzip` or `*` with a q-value above 0, unless
    /// gzip itself is refused with `q=0`).
    public static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        var gzip: Bool?
        var wildcard: Bool?
        for part in header.split(separator: ",") {
            let pieces = part.split(separator: ";")
            guard let first = pieces.first else { continue }
            let name = String(first).trimmingWhitespace().lowercased()
            var quality = 1.0
            for parameter in pieces.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                if pair.count == 2, String(pair[0]).trimmingWhitespace().lowercased() == "q" {
                    quality = Double(String(pair[1]).trimmingWhitespace()) ?? 0
                }
            }
            switch name {
            case "gzip", "x-gzip": gzip = quality > 0
            case "*": wildcard = quality > 0
            default: continue
            }
        }
        return gzip ?? wildcard ?? false
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var view = Substring(self)
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return String(view)
    }
}
