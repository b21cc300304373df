import CLibFuzzer

/// Starts libFuzzer. SwiftPM links a debug executable with its entry point renamed to `<module>_main` (so tests
/// can import executables); each target defines that symbol and calls `run`, which hands the process to
/// libFuzzer's driver with the target's entry point. libFuzzer's own `main` is then not linked.
public enum FuzzDriver {
    /// Runs libFuzzer with the process's arguments; returns its exit status.
    public static func run(
        _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
        _ entry: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32 {
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments, entry)
    }
}
