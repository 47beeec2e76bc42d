#include "console/operators.hpp"

#include <sodium.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "common/store/pg_array.hpp"
#include "console/console_sql.hpp"

namespace aclaim::console {

bool Operator::sees(common::OrgId org) const {
    return !orgs || std::binary_search(orgs->begin(), orgs->end(), org);
}

void init_crypto() {
    if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
}

std::string hash_password(const std::string& password) {
    std::string out(crypto_pwhash_STRBYTES, '\0');
    if (crypto_pwhash_str(out.data(), password.data(), password.size(),
                          crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
        throw std::runtime_error("crypto_pwhash_str ran out of memory");
    }
    out.resize(out.find('\0'));
    return out;
}

bool verify_password(const std::string& hash, const std::string& password) {
    return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

std::string random_token(std::size_t bytes) {
    std::string raw(bytes, '\0');
    randombytes_buf(raw.data(), raw.size());
    std::string hex(bytes * 2 + 1, '\0');
    sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(raw.data()),
                   raw.size());
    hex.pop_back();
    return hex;
}

void put_operator(pqxx::connection& conn, const Operator& op, const std::string& password) {
    if (password.empty()) throw std::invalid_argument("the password must not be empty");
    const auto hash = hash_password(password);
    std::optional<std::string> orgs;
    if (op.orgs) orgs = common::pg_array(*op.orgs);
    pqxx::work txn(conn, "console_put_operator");
    txn.exec_params(sql::kPutOperator, op.name, hash, orgs);
    txn.commit();
}

std::optional<Login> find_login(pqxx::connection& conn, const std::string& name) {
    pqxx::read_transaction txn(conn);
    const auto rows = txn.exec_params(sql::kOperatorLogin, name);
    if (rows.empty()) return std::nullopt;
    Login login{{name, std::nullopt}, rows[0]["password_hash"].as<std::string>()};
    if (!rows[0]["orgs"].is_null()) {
        std::vector<common::OrgId> orgs;
        std::stringstream in(rows[0]["orgs"].as<std::string>());
        std::string item;
        while (std::getline(in, item, ',')) orgs.push_back(std::stoll(item));
        std::sort(orgs.begin(), orgs.end());
        login.op.orgs = std::move(orgs);
    }
    return login;
}

std::optional<Operator> check_login(const std::optional<Login>& login, const std::string& password,
                                    const PasswordCheck& check) {
    if (!login) {
        // Spend the same time as a real check, so that response times do not reveal names.
        check(
            "$argon2id$v=19$m=65536,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$"
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            password);
        return std::nullopt;
    }
    if (!check(login->password_hash, password)) return std::nullopt;
    return login->op;
}

std::optional<Operator> authenticate(pqxx::connection& conn, const Credentials& who) {
    return check_login(find_login(conn, who.name), who.password);
}

std::string Sessions::open(const Operator& op) {
    auto token = random_token();
    std::lock_guard lock(mutex_);
    const auto now = clock_.monotonic_now();
    std::erase_if(by_token_, [&](const auto& kv) { return now - kv.second.last_used > idle_; });
    by_token_[token] = Session{op, random_token(), now};
    return token;
}

std::optional<Session> Sessions::find(const std::string& token) {
    std::lock_guard lock(mutex_);
    const auto it = by_token_.find(token);
    if (it == by_token_.end()) return std::nullopt;
    const auto now = clock_.monotonic_now();
    if (now - it->second.last_used > idle_) {
        by_token_.erase(it);
        return std::nullopt;
    }
    it->second.last_used = now;
    return it->second;
}

void Sessions::close(const std::string& token) {
    std::lock_guard lock(mutex_);
    by_token_.erase(token);
}

}  // namespace aclaim::console
