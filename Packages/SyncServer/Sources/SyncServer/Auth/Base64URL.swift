import Foundation

/// base64url without padding: the encoding of a JWT's three parts and of a JWK's numbers.
enum Base64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.last == "=" { text.removeLast() }
        return text
    }

    /// The bytes `text` encodes, or nil when it is not base64url (padding, `+` and `/` are not).
    static func decode(_ text: some StringProtocol) -> Data? {
        var base64 = ""
        base64.reserveCapacity(text.utf8.count + 3)
        for character in text.unicodeScalars {
            switch character {
            case "A"..."Z", "a"..."z", "0"..."9": base64.unicodeScalars.append(character)
            case "-": base64.append("+")
            case "_": base64.append("/")
            default: return nil
            }
        }
        guard base64.utf8.count % 4 != 1 else { return nil }
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
