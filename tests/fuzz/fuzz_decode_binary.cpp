// libFuzzer target: cereal portable binary bodies of every message type.

#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    aclaim::fuzz::fuzz_body(aclaim::proto::kTagBinary, data, size);
    return 0;
}
