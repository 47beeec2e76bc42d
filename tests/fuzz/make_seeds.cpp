// Writes the seed corpus: one valid message of every type in both encodings, as inputs of each
// fuzz target. Run by hand when the protocol changes; its output is committed under corpus/.
//   make_seeds <corpus dir>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"

namespace {

namespace proto = aclaim::proto;

std::vector<proto::Message> samples() {
    proto::AssignedJob job{41, 7, 1'700'000'000'000'000, 10000, 2, 5, "{\"pr\":17}"};
    return {
        proto::Hello{1, "reviewer-a", 3},
        proto::Claim{2, 4, 1500},
        proto::Renew{3, 41, 7},
        proto::Complete{4, 41, 7, "s3://results/41"},
        proto::Fail{5, 41, 7, "model timeout", true},
        proto::Release{6, 41, 7},
        proto::Bye{7},
        proto::Welcome{1, 3, 10000, 3333, 65536},
        proto::Assigned{2, {job, job}},
        proto::NoWork{2, "wait ended"},
        proto::LeaseMsg{3, 41, 7, 1'700'000'000'010'000, 10000},
        proto::Revoked{0, 41, 7, "reclaimed", "lease expired"},
        proto::Accepted{4, 41, 7, "completed", false},
        proto::Rejected{4, 41, 7, "stale_generation", "held by generation 8"},
        proto::Error{9, "invalid", "max_jobs must be 1..100"},
    };
}

/// Messages that use a later minor version's optional members, seeded under names of their own.
std::vector<std::pair<std::string, proto::Message>> later_samples() {
    proto::Hello hello{1, "reviewer-a", 3};
    hello.features = {"complete_claim", "renew_held"};
    proto::Welcome welcome{1, 3, 10000, 3333, 65536};
    welcome.features = {"complete_claim", "renew_held"};
    proto::Complete complete{4, 41, 7, "s3://results/41"};
    complete.next.push_back(proto::Claim{8, 1, 30000});
    proto::Renew renew{3, 41, 7};
    renew.held = {{10, 42, 2}, {11, 43, 9}, {12, 44, 1}};
    return {{"hello_features", hello},
            {"welcome_features", welcome},
            {"complete_next", complete},
            {"renew_held", renew}};
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

void write(const std::filesystem::path& path, const std::string& bytes) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_seeds <corpus dir>\n";
        return 2;
    }
    const std::filesystem::path dir(argv[1]);
    std::vector<std::pair<std::string, proto::Message>> all;
    for (auto& m : samples()) all.emplace_back(lower(proto::type_name(m)), std::move(m));
    for (auto& named : later_samples()) all.push_back(std::move(named));
    for (const auto& [name, message] : all) {
        const char index = static_cast<char>(message.index());
        for (const auto enc : {proto::Encoding::Binary, proto::Encoding::Json}) {
            const auto f = proto::encode(message, enc);
            const std::string suffix = enc == proto::Encoding::Json ? "_json" : "_binary";
            write(dir / "frames" / (name + suffix),
                  aclaim::fuzz::join_frames({f.tag, f.type, f.body}));
            write(dir / (enc == proto::Encoding::Json ? "json" : "binary") / name,
                  std::string(1, index) + f.body);
        }
    }
    std::cout << "wrote " << all.size() * 4 << " seeds under " << dir << "\n";
    return 0;
}
