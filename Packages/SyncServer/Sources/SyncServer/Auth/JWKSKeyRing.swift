import Foundation

/// The identity provider's public keys as one JWKS document lists them, by key id and algorithm.
///
/// Only signing keys with a `kid` are kept: RSA keys for RS256 and P-256 keys for ES256 (a key whose
/// `alg` names another algorithm, or whose `use` is not `sig`, is passed over, and so is a key the
/// server cannot read, such as a symmetric `oct` key). A document that is not a JWKS is an error; a key
/// that is not usable is not.
struct JWKSKeyRing: Sendable {
    /// A key's place in the ring: the same `kid` may name keys of different types.
    struct Name: Hashable, Sendable {
        var keyID: String
        var algorithm: TokenAlgorithm
    }

    /// A public key's numbers, base64url as in a JWK.
    enum Numbers: Sendable {
        case rsa(modulus: String, exponent: String)
        case p256(x: String, y: String)
    }

    private(set) var keys: [Name: ProviderKey] = [:]
    /// How many keys of the document were passed over.
    private(set) var skipped = 0

    static let empty = JWKSKeyRing()

    private init() {}

    /// The usable keys of the JWKS document `data`.
    /// - Throws: `JWKSUnavailable` when `data` is not a JWKS (a JSON object with a `keys` array).
    init(jwks data: Data) async throws {
        guard let document = try? JSONDecoder().decode(Document.self, from: data) else {
            throw JWKSUnavailable(message: "the document is not a JWKS (a JSON object with a keys array)")
        }
        for entry in document.keys {
            guard let entry = entry.fields, let (name, numbers) = entry.usableKey, keys[name] == nil,
                let key = try? await ProviderKey(keyID: name.keyID, algorithm: name.algorithm, numbers: numbers)
            else {
                skipped += 1
                continue
            }
            keys[name] = key
        }
    }

    /// The key `keyID` for `algorithm`, when the ring holds it.
    func key(_ keyID: String, _ algorithm: TokenAlgorithm) -> ProviderKey? {
        keys[Name(keyID: keyID, algorithm: algorithm)]
    }

    /// The key ids of this ring whose keys `newer` no longer holds, or holds with other numbers.
    func keyIDs(droppedIn newer: JWKSKeyRing) -> Set<String> {
        var dropped: Set<String> = []
        for (name, key) in keys where newer.keys[name]?.material != key.material {
            dropped.insert(name.keyID)
        }
        return dropped
    }

    private struct Document: Decodable {
        var keys: [Entry]
    }

    /// One element of `keys`; nil fields when it is not an object of string members the server reads.
    private struct Entry: Decodable {
        var fields: Fields?

        init(from decoder: any Decoder) throws {
            fields = try? Fields(from: decoder)
        }
    }

    private struct Fields: Decodable {
        var kty: String?
        var kid: String?
        var use: String?
        var alg: String?
        var crv: String?
        var n: String?
        var e: String?
        var x: String?
        var y: String?

        /// The key's name and numbers, when it is a signing key for RS256 or ES256 with a `kid`.
        var usableKey: (Name, Numbers)? {
            guard let kid, !kid.isEmpty, use == nil || use == "sig" else { return nil }
            switch kty {
            case "RSA":
                guard alg == nil || alg == TokenAlgorithm.rs256.rawValue, let n, let e else { return nil }
                return (Name(keyID: kid, algorithm: .rs256), .rsa(modulus: n, exponent: e))
            case "EC":
                guard crv == "P-256", alg == nil || alg == TokenAlgorithm.es256.rawValue, let x, let y else {
                    return nil
                }
                return (Name(keyID: kid, algorithm: .es256), .p256(x: x, y: y))
            default:
                return nil
            }
        }
    }
}
