import Foundation
import SyncModels

/// An element type a sequence can encode: in JSON, a run of elements is one value (a string for Unicode
/// scalars, an array otherwise); in the compact binary encoding, a run is bytes.
///
/// Any `Codable` type gets a JSON array and a length-prefixed JSON binary form for free; `Unicode.Scalar`
/// encodes runs as UTF-8 text.
public protocol SequenceElement: Sendable, Hashable {
    /// Encodes a run of elements as one value.
    static func encodeRun(_ elements: [Self], to encoder: any Encoder) throws
    /// Decodes a run of elements written by `encodeRun`.
    static func decodeRun(from decoder: any Decoder) throws -> [Self]
    /// Reads a run of elements from the JSON `encodeRun` wrote; bails on anything it is not sure of (the
    /// default always does, leaving the run to `decodeRun(from:)`).
    static func readRun(reading reader: inout JSONReader) throws(JSONReader.Bail) -> [Self]
    /// Appends a run of elements to compact binary output.
    static func writeRun(_ elements: some Collection<Self>, to writer: inout BinaryWriter)
    /// Reads a run of `count` elements written by `writeRun`.
    static func readRun(count: Int, from reader: inout BinaryReader) throws -> [Self]
}

extension SequenceElement where Self: Codable {
    public static func encodeRun(_ elements: [Self], to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(elements)
    }

    public static func decodeRun(from decoder: any Decoder) throws -> [Self] {
        try decoder.singleValueContainer().decode([Self].self)
    }

    public static func writeRun(_ elements: some Collection<Self>, to writer: inout BinaryWriter) {
        for element in elements {
            // Encoding a Codable value of ours to JSON does not fail for the element types used here.
            let data = (try? CanonicalJSON.encode(element)) ?? Data()
            writer.writeBytes(data)
        }
    }

    public static func readRun(count: Int, from reader: inout BinaryReader) throws -> [Self] {
        var result: [Self] = []
        result.reserveCapacity(min(count, reader.remaining))
        for _ in 0..<count {
            let bytes = try reader.readBytes()
            do {
                result.append(try CanonicalJSON.decode(Self.self, from: Data(bytes)))
            } catch {
                throw SyncCRDTError.invalidEncoding("an element does not decode")
            }
        }
        return result
    }
}

extension String: SequenceElement {}
extension Int: SequenceElement {}
extension UInt64: SequenceElement {}
extension JSONValue: SequenceElement {}

extension Unicode.Scalar: SequenceElement {
    /// A run of scalars is a JSON string.
    public static func encodeRun(_ elements: [Unicode.Scalar], to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: elements)
        try container.encode(String(scalars))
    }

    public static func decodeRun(from decoder: any Decoder) throws -> [Unicode.Scalar] {
        Array(try decoder.singleValueContainer().decode(String.self).unicodeScalars)
    }

    /// A run of scalars is their UTF-8 bytes (self-delimiting: the reader knows the count).
    public static func writeRun(_ elements: some Collection<Unicode.Scalar>, to writer: inout BinaryWriter) {
        for scalar in elements { writer.writeUTF8(scalar) }
    }

    public static func readRun(count: Int, from reader: inout BinaryReader) throws -> [Unicode.Scalar] {
        var result: [Unicode.Scalar] = []
        result.reserveCapacity(min(count, reader.remaining))
        for _ in 0..<count { result.append(try reader.readUTF8Scalar()) }
        return result
    }
}

extension String {
    /// A run of strings in binary is each string's length-prefixed UTF-8.
    public static func writeRun(_ elements: some Collection<String>, to writer: inout BinaryWriter) {
        for element in elements { element.encode(to: &writer) }
    }

    public static func readRun(count: Int, from reader: inout BinaryReader) throws -> [String] {
        var result: [String] = []
        result.reserveCapacity(Swift.min(count, reader.remaining))
        for _ in 0..<count { result.append(try String(from: &reader)) }
        return result
    }
}
