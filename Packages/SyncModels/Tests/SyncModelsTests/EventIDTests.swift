import PropertyBased
import SyncTestSupport
import Testing

@testable import SyncModels

@Suite(.onOwnThreads) struct EventIDTests {
    @Test func strictlyIncreasingWhateverTheWallClockDoes() async {
        // Each raw value: a wall-clock jump (-50...+50 ms, often 0) and a burst length (usually short, one in
        // seven longer than the 12-bit counter holds).
        await propertyCheck(count: 200, input: Gen.int(in: 0...1_000_000).array(of: 1...30)) { raws in
            var generator = EventIDGenerator()
            var wall: UInt64 = 1_700_000_000_000
            var previous: EventID?
            for raw in raws {
                let jump = Int64(raw % 101) - 50
                wall = UInt64(max(0, Int64(wall) + (raw % 3 == 0 ? 0 : jump)))
                for _ in 0..<(raw % 7 == 0 ? 4100 + raw % 500 : raw % 50 + 1) {
                    let id = generator.next(wall: wall)
                    #expect(id.isVersion7)
                    if let previous {
                        #expect(previous < id)
                        #expect(previous.description < id.description, "string order is byte order")
                    }
                    previous = id
                }
            }
        }
    }

    @Test func carriesMillisecondsAndParses() throws {
        var generator = EventIDGenerator()
        let id = generator.next(wall: 0x18f_4e3a_5b7c)
        #expect(id.milliseconds == 0x18f_4e3a_5b7c)
        #expect(id.description.hasPrefix("018f4e3a-5b7c-7"))
        #expect(try EventID(id.description) == id)
        #expect(try EventID(id.description.uppercased()) == id)
        for bad in ["", "not-a-uuid", "018f4e3a5b7c7d8e9f00112233445566", "018f4e3a-5b7c-7d8e-9f00-11223344556"] {
            #expect(throws: SyncModelsError.self) { try EventID(bad) }
        }
    }

    @Test func versionFourIsNotVersionSeven() throws {
        #expect(try EventID("f47ac10b-58cc-4372-a567-0e02b2c3d479").isVersion7 == false)
    }
}
