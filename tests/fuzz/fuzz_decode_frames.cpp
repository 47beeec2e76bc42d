// libFuzzer target: any number of frames with any contents, as a peer could send them.

#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    aclaim::fuzz::decode_and_check(aclaim::fuzz::split_frames(data, size));
    return 0;
}
