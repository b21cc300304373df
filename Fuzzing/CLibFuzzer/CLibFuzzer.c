// Only the header matters: LLVMFuzzerRunDriver lives in the libFuzzer runtime that -sanitize=fuzzer links.
