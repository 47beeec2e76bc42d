#include "console/operators.hpp"

#include <sodium.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "common/store/pg_array.hpp"
#include "console/console_sql.hpp"

namespace aclaim::console {

bool Operator::sees(store::OrgId org) const {
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
    if (op.orgs) orgs = store::pg_array(*op.orgs);
    pqxx::work txn(conn, "console_put_operator");
    txn.exec_params(sql::kPutOperator, op.name, hash, orgs);
    txn.exec_params(sql::kEndOperatorSessions, op.name);
    txn.commit();
}

bool remove_operator(pqxx::connection& conn, const std::string& name) {
    pqxx::work txn(conn, "console_remove_operator");
    const auto removed = txn.exec_params(sql::kRemoveOperator, name).affected_rows();
    txn.commit();
    return removed > 0;
}

Operator operator_of(const std::string& name, const pqxx::field& orgs) {
    Operator op{name, std::nullopt};
    if (orgs.is_null()) return op;
    std::vector<store::OrgId> ids;
    std::stringstream in(orgs.as<std::string>());
    std::string item;
    while (std::getline(in, item, ',')) ids.push_back(std::stoll(item));
    std::sort(ids.begin(), ids.end());
    op.orgs = std::move(ids);
    return op;
}

std::optional<Login> find_login(pqxx::connection& conn, const std::string& name) {
    pqxx::read_transaction txn(conn);
    const auto rows = txn.exec_params(sql::kOperatorLogin, name);
    if (rows.empty()) return std::nullopt;
    return Login{operator_of(name, rows[0]["orgs"]), rows[0]["password_hash"].as<std::string>()};
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

}  // namespace aclaim::console
