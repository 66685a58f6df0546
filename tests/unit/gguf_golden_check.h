// Compares zinc's view of a GGUF file with the JSON gguf-py's gguf_dump.py --json --json-array printed for it
// (committed goldens tests/data/gguf/golden/*.dump.json, made by tools/gguf/make_golden.py).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zinc::test {

// zinc's side, in the shape `zinc inspect --json` prints (metadata: [{key,type,element_type?,inner_element_type?,
// value}], tensors: [{name,type,shape}]).
inline void flatten(const nlohmann::json& v, std::vector<nlohmann::json>& out) {
    if (v.is_array()) {
        for (const auto& e : v) flatten(e, out);
    } else {
        out.push_back(v);
    }
}

inline bool same_scalar(const nlohmann::json& a, const nlohmann::json& b) {
    if (a.is_number_float() || b.is_number_float()) {
        if (!a.is_number() || !b.is_number()) return false;
        const double x = a.get<double>(), y = b.get<double>();
        return x == y || std::fabs(x - y) <= 1e-6 * std::max(std::fabs(x), std::fabs(y));
    }
    return a == b;
}

inline void compare_with_dump(const nlohmann::json& zinc, const nlohmann::json& dump, const std::string& what) {
    // metadata: gguf-py lists the header fields as GGUF.* pseudo-keys first
    std::vector<std::pair<std::string, nlohmann::json>> want;
    for (const auto& [k, v] : dump.at("metadata").items())
        if (k.rfind("GGUF.", 0) != 0) want.emplace_back(k, v);
    std::sort(want.begin(), want.end(),
              [](const auto& a, const auto& b) { return a.second.at("index") < b.second.at("index"); });
    const auto& got = zinc.at("metadata");
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
        const auto& [key, d] = want[i];
        const auto& z = got[i];
        SCOPED_TRACE(what + ": " + key);
        EXPECT_EQ(z.at("key"), key);
        EXPECT_EQ(z.at("type"), d.at("type"));
        if (d.at("type") == "ARRAY") {
            std::vector<std::string> types{z.at("element_type").get<std::string>()};
            if (z.contains("inner_element_type")) types.push_back(z.at("inner_element_type").get<std::string>());
            EXPECT_EQ(nlohmann::json(types), d.at("array_types"));
            if (z.contains("value") && d.contains("value")) {
                std::vector<nlohmann::json> a, b;
                flatten(z.at("value"), a);
                flatten(d.at("value"), b);
                ASSERT_EQ(a.size(), b.size());
                for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(same_scalar(a[k], b[k])) << a[k] << " vs " << b[k];
            } else {
                EXPECT_TRUE(z.value("truncated", false));
                EXPECT_EQ(z.at("length"), d.at("value").size());
            }
        } else {
            EXPECT_TRUE(same_scalar(z.at("value"), d.at("value"))) << z.at("value") << " vs " << d.at("value");
        }
    }
    // tensors
    std::vector<std::pair<std::string, nlohmann::json>> wt;
    for (const auto& [k, v] : dump.at("tensors").items()) wt.emplace_back(k, v);
    std::sort(wt.begin(), wt.end(),
              [](const auto& a, const auto& b) { return a.second.at("index") < b.second.at("index"); });
    const auto& gt = zinc.at("tensors");
    ASSERT_EQ(gt.size(), wt.size()) << what;
    for (size_t i = 0; i < wt.size(); ++i) {
        SCOPED_TRACE(what + ": tensor " + wt[i].first);
        EXPECT_EQ(gt[i].at("name"), wt[i].first);
        EXPECT_EQ(gt[i].at("type"), wt[i].second.at("type"));
        EXPECT_EQ(gt[i].at("shape"), wt[i].second.at("shape"));
    }
}

}  // namespace zinc::test
