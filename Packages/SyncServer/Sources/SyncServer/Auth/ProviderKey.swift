import JWTKit

/// One public key of the identity provider's JWKS, bound to the one algorithm it verifies.
struct ProviderKey: Sendable {
    /// The key's `kid`.
    let keyID: String
    let algorithm: TokenAlgorithm
    /// The key's public numbers, to tell a key replaced under the same `kid` from the same key listed again.
    let material: String
    /// A collection holding this key only: jwt-kit verifies with it whatever the token's header says.
    let collection: JWTKeyCollection

    /// The key a JWK describes: RSA for RS256, or P-256 for ES256.
    /// - Throws: jwt-kit's error for numbers that are not a valid key (an RSA key under 2048 bits, a point
    ///   off the curve).
    init(keyID: String, algorithm: TokenAlgorithm, numbers: JWKSKeyRing.Numbers) async throws {
        let collection = JWTKeyCollection()
        let identifier = JWKIdentifier(string: keyID)
        switch numbers {
        case .rsa(let modulus, let exponent):
            let key = try Insecure.RSA.PublicKey(modulus: modulus, exponent: exponent)
            await collection.add(rsa: key, digestAlgorithm: .sha256, kid: identifier)
            material = "RSA \(modulus) \(exponent)"
        case .p256(let x, let y):
            let key = try ES256PublicKey(parameters: (x, y))
            await collection.add(ecdsa: key, kid: identifier)
            material = "EC P-256 \(x) \(y)"
        }
        self.keyID = keyID
        self.algorithm = algorithm
        self.collection = collection
    }
}
