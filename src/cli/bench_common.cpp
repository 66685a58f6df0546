#include "cli/bench_common.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <stdexcept>

#include "backend/devices.h"

#ifndef ZINC_BUILD_COMMIT
#define ZINC_BUILD_COMMIT "unknown"
#endif
#ifndef ZINC_BUILD_NUMBER
#define ZINC_BUILD_NUMBER 0
#endif

namespace zinc::cli {

std::vector<int32_t> random_ids(int n, uint32_t seed, int n_vocab) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = tok(rng);
    return ids;
}

namespace {

// A run of decimal digits at s[at...], with a '-' first where `sign`; false when there is none or it is out of
// [lo, hi]. Ten digits at most, so that no overflow can happen before the range check.
bool take_int(std::string_view s, size_t& at, bool sign, int64_t lo, int64_t hi, int64_t& v) {
    const bool neg = sign && at < s.size() && s[at] == '-';
    size_t i = at + (neg ? 1 : 0), digits = 0;
    int64_t x = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
        if (digits == 10) return false;
        x = x * 10 + (s[i] - '0');
    }
    if (digits == 0) return false;
    v = neg ? -x : x;
    at = i;
    return v >= lo && v <= hi;
}

}  // namespace

std::vector<int> parse_int_list(std::string_view s, int64_t lo, int64_t hi) {
    const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                              " or a range FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*STEP";
    std::vector<int> out;
    size_t start = 0;
    while (true) {
        const size_t comma = s.find(',', start);
        const std::string_view e = s.substr(start, comma == std::string_view::npos ? s.npos : comma - start);
        const std::string quoted = "'" + std::string(e) + "'";
        size_t at = 0;
        int64_t first = 0, last = 0, step = 1;
        char op = '+';
        const std::invalid_argument bad("expects " + range + ", not " + quoted);
        if (!take_int(e, at, lo < 0, lo, hi, first)) throw bad;
        last = first;
        if (at < e.size() && e[at] == '-') {
            ++at;
            if (!take_int(e, at, false, lo, hi, last)) throw bad;
            if (at < e.size() && (e[at] == '+' || e[at] == '*')) {
                op = e[at++];
                if (!take_int(e, at, false, 1, std::max<int64_t>(hi, 1), step)) throw bad;
            }
        }
        if (at != e.size()) throw bad;
        if (last < first) throw std::invalid_argument("the range " + quoted + " ends before it starts");
        // Each value must grow, as llama-bench requires: a step of 0 ("*1", or "*" from 0) would never end.
        if ((op == '*' && (step < 2 || first <= 0)) || step < 1)
            throw std::invalid_argument("the range " + quoted + " does not grow: " +
                                        (op == '*' ? "*STEP needs FIRST >= 1 and STEP >= 2" : "+STEP needs STEP >= 1"));
        for (int64_t v = first; v <= last; v = op == '+' ? v + step : v * step) {
            if (out.size() == kMaxListValues)
                throw std::invalid_argument("more than " + std::to_string(kMaxListValues) + " values in '" +
                                            std::string(s) + "'");
            out.push_back(static_cast<int>(v));
        }
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return out;
}

CLI::Validator int_list(int64_t lo, int64_t hi, std::vector<std::string> words) {
    return CLI::Validator(
        [lo, hi, words](std::string& s) -> std::string {
            std::string rest;  // the elements that are not words
            size_t start = 0;
            while (true) {
                const size_t comma = s.find(',', start);
                const std::string e = s.substr(start, comma == std::string::npos ? s.npos : comma - start);
                if (std::find(words.begin(), words.end(), e) == words.end()) rest += (rest.empty() ? "" : ",") + e;
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
            if (rest.empty()) return "";
            try {
                parse_int_list(rest, lo, hi);
            } catch (const std::invalid_argument& e) {
                return e.what();
            }
            return "";
        },
        "LIST");
}

std::string jsonl_text(const nlohmann::ordered_json& records) {
    std::string s;
    for (const auto& r : records) s += r.dump() + "\n";
    return s;
}

std::string build_commit() { return ZINC_BUILD_COMMIT; }
int build_number() { return ZINC_BUILD_NUMBER; }

std::string cpu_info() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    // x86 says "model name", some ARM kernels "Model" or "Hardware".
    for (const char* key : {"model name", "Model", "Hardware"}) {
        f.clear();
        f.seekg(0);
        while (std::getline(f, line)) {
            const size_t colon = line.find(':');
            if (colon == std::string::npos || line.compare(0, std::string(key).size(), key) != 0) continue;
            std::string v = line.substr(colon + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            if (!v.empty()) return v;
        }
    }
    return "";
}

std::string gpu_info() {
    std::string s;
    for (const auto& g : backend::query_cuda().gpus) s += (s.empty() ? "" : ", ") + g.name;
    return s;
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%FT%TZ", &tm);
    return buf;
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
    if (output == "json" || output == "jsonl" || output == "csv") {
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
        return output == "json" ? j.dump(2) + "\n" : output == "jsonl" ? jsonl_text(j) : csv;
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
