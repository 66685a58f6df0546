#include "cli/bench_common.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace zinc::cli {

std::vector<int32_t> random_ids(int n, uint32_t seed, int n_vocab) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = tok(rng);
    return ids;
}

std::string csv_text(const nlohmann::ordered_json& records) {
    std::string s;
    auto field = [&s](const nlohmann::ordered_json& v) {
        if (v.is_null()) return;
        if (!v.is_string()) {
            s += v.dump();
            return;
        }
        s += '"';
        for (char c : v.get<std::string>()) {
            if (c == '"') s += '"';
            s += c;
        }
        s += '"';
    };
    if (records.empty()) return s;
    bool first = true;
    for (const auto& [key, _] : records.front().items()) {
        if (!first) s += ',';
        s += key;
        first = false;
    }
    s += '\n';
    for (const auto& row : records) {
        first = true;
        for (const auto& [key, v] : row.items()) {
            if (!first) s += ',';
            field(v);
            first = false;
        }
        s += '\n';
    }
    return s;
}

std::string markdown_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
    // "±" and "µ" are two bytes and one column.
    auto width = [](const std::string& s) {
        size_t n = s.size();
        for (const char* two : {"±", "µ"})
            for (size_t at = s.find(two); at != std::string::npos; at = s.find(two, at + 2)) --n;
        return n;
    };
    std::vector<size_t> w(rows.front().size(), 2);  // "-:" at least
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c) w[c] = std::max(w[c], width(row[c]));
    std::string s;
    auto line = [&](const std::vector<std::string>& row) {
        for (size_t c = 0; c < row.size(); ++c) {
            const std::string pad(w[c] - width(row[c]), ' ');
            s += "| " + (right[c] ? pad + row[c] : row[c] + pad) + " ";
        }
        s += "|\n";
    };
    line(rows.front());
    for (size_t c = 0; c < w.size(); ++c)
        s += "| " + (right[c] ? std::string(w[c] - 1, '-') + ":" : std::string(w[c], '-')) + " ";
    s += "|\n";
    for (size_t i = 1; i < rows.size(); ++i) line(rows[i]);
    return s;
}

std::string profile_text(const std::vector<Profile>& profiles, const std::string& backend, const std::string& output) {
    if (output == "json" || output == "csv") {
        nlohmann::ordered_json j = nlohmann::ordered_json::array();
        std::string csv = "profile_op,calls,us,n_prompt,n_depth,n_seq\n";
        for (const Profile& p : profiles)
            for (const auto& op : p.ops) {
                j.push_back({{"profile_op", op.label}, {"calls", op.calls}, {"us", op.us}, {"n_prompt", p.n_prompt},
                             {"n_depth", p.n_depth}, {"n_seq", p.n_seq}});
                csv += "\"" + op.label + "\"," + std::to_string(op.calls) + "," + format("%.2f", op.us) + "," +
                       std::to_string(p.n_prompt) + "," + std::to_string(p.n_depth) + "," +
                       std::to_string(p.n_seq) + "\n";
            }
        return output == "json" ? j.dump(2) + "\n" : csv;
    }
    std::string s;
    for (const Profile& p : profiles) {
        double sum = 0;
        for (const auto& op : p.ops) sum += op.us;
        s += (p.n_prompt > 0 ? "\none prompt of " + std::to_string(p.n_prompt) + " tokens: "
             : p.n_seq > 1 ? "\none decode step of " + std::to_string(p.n_seq) + " sequences at position " +
                                 std::to_string(p.n_depth) + ": "
                             : "\none decode step at position " + std::to_string(p.n_depth) + ": ") +
             format("%.1f", p.step_us) + " µs on the host, " + format("%.1f", sum) + " µs in " + backend + " ops" +
             (p.before_us > 0 ? "; unprofiled, the steps before it " + format("%.1f", p.before_us) + " µs each, " +
                                    format("%.1f", p.queue_us) + " of them queueing their ops"
                              : "") +
             "\n\n";
        s += "| op | calls | µs | % of ops |\n|---|---:|---:|---:|\n";
        for (const auto& op : p.ops)
            s += "| " + op.label + " | " + std::to_string(op.calls) + " | " + format("%.1f", op.us) + " | " +
                 format("%.1f", sum > 0 ? 100.0 * op.us / sum : 0.0) + " |\n";
    }
    return s;
}

std::string format(const char* fmt, double a, double b) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, a, b);
    return buf;
}

}  // namespace zinc::cli
