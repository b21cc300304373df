#ifndef ATS_PROXY_CLIBFUZZER_H
#define ATS_PROXY_CLIBFUZZER_H
#include <stddef.h>
#include <stdint.h>

/** libFuzzer's driver (part of -sanitize=fuzzer): parses libFuzzer's flags from argc/argv and runs `callback`. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
