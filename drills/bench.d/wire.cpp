// Raw DEALER sockets speaking the wire protocol (drills/bench.d/wire.hpp).

#include "drills/bench.d/wire.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>

namespace aclaim::drills {

namespace proto = aclaim::proto;

void send(zmq::socket_t& s, const proto::Message& m) {
    const proto::Frames f = proto::encode(m, proto::Encoding::Binary);
    (void)s.send(zmq::buffer(f.tag), zmq::send_flags::sndmore);
    (void)s.send(zmq::buffer(f.type), zmq::send_flags::sndmore);
    (void)s.send(zmq::buffer(f.body), zmq::send_flags::none);
}

std::optional<proto::Message> receive(zmq::socket_t& s) {
    std::vector<zmq::message_t> parts;
    zmq::message_t part;
    if (!s.recv(part, zmq::recv_flags::dontwait)) return std::nullopt;
    parts.push_back(std::move(part));
    while (parts.back().more()) {
        zmq::message_t next;
        (void)s.recv(next, zmq::recv_flags::none);
        parts.push_back(std::move(next));
    }
    std::vector<std::string_view> frames;
    frames.reserve(parts.size());
    for (const auto& p : parts) frames.push_back(p.to_string_view());
    auto decoded = proto::decode(frames);
    if (auto* d = std::get_if<proto::Decoded>(&decoded)) return std::move(d->message);
    return std::nullopt;
}

std::unique_ptr<zmq::socket_t> connect(zmq::context_t& ctx, const std::string& endpoint,
                                       const worker::CurveKeys& curve) {
    auto s = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    if (curve.enabled()) {
        s->set(zmq::sockopt::curve_serverkey, curve.server_public);
        s->set(zmq::sockopt::curve_publickey, curve.client_public);
        s->set(zmq::sockopt::curve_secretkey, curve.client_secret);
    }
    s->connect(endpoint);
    return s;
}

std::vector<std::string> session_names(const std::string& prefix, int n, int first) {
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(std::max(n, 0)));
    for (int i = 0; i < n; ++i) names.push_back(prefix + "-" + std::to_string(first + i));
    return names;
}

std::optional<std::string> get_metrics(const std::string& host_port) {
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return std::nullopt;
    const timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(host_port.substr(colon + 1))));
    inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr);
    std::string response;
    bool sent = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        const std::string request = "GET /metrics HTTP/1.0\r\nHost: " + host_port + "\r\n\r\n";
        sent =
            ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size());
        std::array<char, 8192> buf{};
        ssize_t n = 0;
        while (sent && (n = ::recv(fd, buf.data(), buf.size(), 0)) > 0) {
            response.append(buf.data(), static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    const auto body = response.find("\r\n\r\n");
    if (!sent || body == std::string::npos || response.rfind("HTTP/1.", 0) != 0)
        return std::nullopt;
    return response.substr(body + 4);
}

std::optional<double> gauge(const std::string& host_port, std::string_view name) {
    const auto body = get_metrics(host_port);
    if (!body) return std::nullopt;
    const auto at = ("\n" + *body).find("\n" + std::string(name) + " ");
    if (at == std::string::npos) return std::nullopt;
    return std::stod(body->substr(at + name.size() + 1));
}

}  // namespace aclaim::drills
