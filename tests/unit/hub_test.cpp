// The parts of models by name that need no network (src/hub/): names, the hub's file listing as untrusted input,
// the quant a tag picks, and the cache's listing and removal. Downloads are tested against a local hub in
// tests/hub/pull_test.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "hub/cache.h"
#include "hub/files.h"
#include "hub/name.h"

namespace {

using namespace zinc::hub;

std::string entry(const std::string& path, uint64_t size = 10) {
    return R"({"type":"file","oid":")" + std::string(40, 'a') + R"(","size":)" + std::to_string(size) +
           R"(,"path":")" + path + R"(","lfs":{"oid":")" + std::string(64, 'b') + R"(","size":)" +
           std::to_string(size) + "}}";
}

std::vector<RepoFile> listing(const std::vector<std::string>& paths) {
    std::string json = "[";
    for (const auto& p : paths) {
        if (json.size() > 1) json += ",";
        json += entry(p);
    }
    std::vector<RepoFile> files;
    parse_listing(json + "]", files);
    return files;
}

std::vector<std::string> paths(const std::vector<RepoFile>& files) {
    std::vector<std::string> r;
    for (const auto& f : files) r.push_back(f.path);
    return r;
}

TEST(HubName, ParsesOwnerRepoAndQuant) {
    const ModelName n = parse_model_name("unsloth/Qwen3-0.6B-GGUF:Q4_K_M");
    EXPECT_EQ(n.owner, "unsloth");
    EXPECT_EQ(n.repo, "Qwen3-0.6B-GGUF");
    EXPECT_EQ(n.tag, "Q4_K_M");
    EXPECT_EQ(n.text(), "unsloth/Qwen3-0.6B-GGUF:Q4_K_M");
    EXPECT_EQ(parse_model_name("a/b").tag, "");
    EXPECT_EQ(parse_model_name("a/b:UD-Q4_K_XL").tag, "UD-Q4_K_XL");
}

TEST(HubName, RefusesWhatIsNotAName) {
    for (const char* bad : {"", "a", "a/", "/b", "a/b/c", "../b", "a/..", "a/.b", "-a/b", "a/b:", "a/b:Q4 K",
                            "a/b:Q4/K", "a b/c", "a/b\n", "a\\b/c", "a/b:x:y"})
        EXPECT_THROW(parse_model_name(bad), std::invalid_argument) << bad;
    EXPECT_THROW(parse_model_name(std::string(97, 'a') + "/b"), std::invalid_argument);
}

TEST(HubFiles, SafePathsStayInside) {
    for (const char* ok : {"a.gguf", "sub/a.gguf", "Q4_K_M/m-00001-of-00002.gguf", "a b.gguf", "a..b.gguf"})
        EXPECT_TRUE(safe_repo_path(ok)) << ok;
    for (const char* bad : {"", "/a.gguf", "../a.gguf", "a/../../b.gguf", "a/./b.gguf", "a//b.gguf", "a/",
                            "a\\b.gguf", "c:a.gguf", "a\nb.gguf", ".."})
        EXPECT_FALSE(safe_repo_path(bad)) << bad;
    EXPECT_FALSE(safe_repo_path(std::string(kMaxPath + 1, 'a')));
    std::string deep;
    for (int i = 0; i < 17; ++i) deep += "d/";
    EXPECT_FALSE(safe_repo_path(deep + "a.gguf"));
}

TEST(HubFiles, ListingKeepsCheckableGgufFilesOnly) {
    const std::string json = "[" + entry("README.md") + "," + R"({"type":"directory","path":"sub","size":0})" + "," +
                             entry("sub/m-Q8_0.gguf", 1234) + "," + entry("../up-Q8_0.gguf") + "," +
                             R"({"type":"file","path":"nohash.gguf","size":5})" + "," +
                             R"({"type":"file","path":"neg.gguf","size":-5,"oid":")" + std::string(40, 'c') +
                             R"("})" + "," + R"({"type":"file","path":"git.gguf","size":5,"oid":")" +
                             std::string(40, 'c') + R"("})" + "," +
                             R"({"type":"file","path":"huge.gguf","size":1,"lfs":{"oid":")" + std::string(64, 'd') +
                             R"(","size":1e30}})" + "]";
    std::vector<RepoFile> files;
    size_t skipped = 0;
    parse_listing(json, files, &skipped);
    ASSERT_EQ(paths(files), (std::vector<std::string>{"sub/m-Q8_0.gguf", "git.gguf"}));
    EXPECT_EQ(files[0].size, 1234u);
    EXPECT_EQ(files[0].sha256, std::string(64, 'b'));
    EXPECT_EQ(files[1].sha256, "");
    EXPECT_EQ(files[1].git_oid, std::string(40, 'c'));
    EXPECT_EQ(skipped, 4u);  // the escaping path, no hash, a negative size, a size past the limit
}

TEST(HubFiles, ListingThatIsNotOneIsRefused) {
    std::vector<RepoFile> files;
    EXPECT_THROW(parse_listing("{}", files), std::runtime_error);
    EXPECT_THROW(parse_listing("[", files), std::runtime_error);
    EXPECT_THROW(parse_listing(std::string(200, '[') + std::string(200, ']'), files), std::runtime_error);
    EXPECT_THROW(parse_listing(std::string(kMaxListingBytes + 1, ' '), files), std::runtime_error);
}

TEST(HubFiles, ListingRoundTrips) {
    const std::vector<RepoFile> files = listing({"a-Q8_0.gguf", "dir/b-Q4_K_M.gguf"});
    std::vector<RepoFile> back;
    parse_listing(listing_json(files), back);
    ASSERT_EQ(paths(back), paths(files));
    EXPECT_EQ(back[1].sha256, files[1].sha256);
    EXPECT_EQ(back[1].git_oid, files[1].git_oid);
}

TEST(HubFiles, QuantTagOfAFileName) {
    EXPECT_EQ(quant_tag("Qwen3-8B-Q4_K_M.gguf"), "Q4_K_M");
    EXPECT_EQ(quant_tag("dir/Qwen3-8B-q8_0-00001-of-00002.gguf"), "Q8_0");
    EXPECT_EQ(quant_tag("model.BF16.gguf"), "BF16");
    EXPECT_EQ(quant_tag("Qwen3-UD-Q4_K_XL.gguf"), "Q4_K_XL");
    EXPECT_EQ(quant_tag("model.gguf"), "");
    EXPECT_EQ(quant_tag("README.md"), "");
}

TEST(HubFiles, TagMatchesAsLlamaCppMatchesIt) {
    EXPECT_TRUE(names_tag("m-Q4_K_M.gguf", "q4_k_m"));
    EXPECT_TRUE(names_tag("Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"));
    EXPECT_FALSE(names_tag("Q4_K_M/m-00001-of-00002.gguf", "Q4_K_M"));  // "Q4_K_M/": as llama.cpp, no match
    EXPECT_FALSE(names_tag("m-Q4_K_M.gguf", "Q4_K"));                   // the tag must end at '.' or '-'
    EXPECT_FALSE(names_tag("m-Q4_K_M.gguf", ""));
}

TEST(HubChoose, DefaultIsQ4KMThenQ8ThenTheFirstModel) {
    EXPECT_EQ(paths(choose_model(listing({"mmproj-m-Q4_K_M.gguf", "m-Q8_0.gguf", "m-Q4_K_M.gguf"}), "", "x")),
              (std::vector<std::string>{"m-Q4_K_M.gguf"}));
    EXPECT_EQ(paths(choose_model(listing({"m-F16.gguf", "m-Q8_0.gguf"}), "", "x")),
              (std::vector<std::string>{"m-Q8_0.gguf"}));
    EXPECT_EQ(paths(choose_model(listing({"imatrix.gguf", "m-F16.gguf", "m-BF16.gguf"}), "", "x")),
              (std::vector<std::string>{"m-F16.gguf"}));
}

TEST(HubChoose, TagPicksItsFileInAnyCase) {
    EXPECT_EQ(paths(choose_model(listing({"m-Q8_0.gguf", "m-Q4_K_M.gguf"}), "q8_0", "x")),
              (std::vector<std::string>{"m-Q8_0.gguf"}));
    try {
        choose_model(listing({"m-Q8_0.gguf", "mmproj-Q2_K.gguf"}), "Q2_K", "o/r:Q2_K");
        FAIL() << "a quant the repository lacks is refused";
    } catch (const std::runtime_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("o/r:Q2_K: no model file for the quant Q2_K"), std::string::npos) << msg;
        EXPECT_NE(msg.find("m-Q8_0.gguf"), std::string::npos) << msg;
    }
    EXPECT_THROW(choose_model(listing({"mmproj-x.gguf"}), "", "x"), std::runtime_error);
}

TEST(HubChoose, SplitModelTakesEveryShardInOrder) {
    const auto files = listing({"Q4_K_M/m-Q4_K_M-00002-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
                                "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", "m-Q8_0.gguf"});
    EXPECT_EQ(paths(choose_model(files, "Q4_K_M", "x")),
              (std::vector<std::string>{"Q4_K_M/m-Q4_K_M-00001-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
                                        "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf"}));
    // A set with a shard missing from the listing is refused, naming it.
    try {
        choose_model(listing({"m-Q4_K_M-00001-of-00002.gguf"}), "", "x");
        FAIL() << "a missing shard is refused";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("m-Q4_K_M-00002-of-00002.gguf"), std::string::npos) << e.what();
    }
}

TEST(HubCache, ListsAndRemovesByQuant) {
    const zinc::test::TempDir dir;
    const fs::path cache = dir.file("cache");
    const ModelName repo = parse_model_name("o/r"), q8 = parse_model_name("o/r:Q8_0");
    EXPECT_EQ(file_path(cache, repo, "sub/a.gguf"), cache / "models" / "o" / "r" / "sub" / "a.gguf");
    EXPECT_THROW(file_path(cache, repo, "../a.gguf"), std::invalid_argument);
    const auto write = [&](const std::string& rel, size_t n) {
        const fs::path p = repo_dir(cache, repo) / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << std::string(n, 'x');
    };
    write("m-Q8_0.gguf", 100);
    write("s/m-Q4_K_M-00001-of-00002.gguf", 10);
    write("s/m-Q4_K_M-00002-of-00002.gguf.part", 5);
    save_listing(cache, repo, listing({"m-Q8_0.gguf"}));
    ASSERT_TRUE(load_listing(cache, repo).has_value());
    const std::vector<CachedModel> models = cached_models(cache);
    ASSERT_EQ(models.size(), 2u);
    EXPECT_EQ(models[0].repo_id, "o/r");
    EXPECT_EQ(models[0].tag, "Q8_0");
    EXPECT_FALSE(models[0].partial);
    EXPECT_EQ(models[0].bytes, 100u);
    EXPECT_EQ(models[1].path, "s/m-Q4_K_M-00001-of-00002.gguf");
    EXPECT_EQ(models[1].count, 2u);
    EXPECT_EQ(models[1].files, 1u);
    EXPECT_TRUE(models[1].partial);
    EXPECT_EQ(models[1].bytes, 15u);

    EXPECT_EQ(remove_cached(cache, q8), 1u);
    EXPECT_EQ(cached_models(cache).size(), 1u);
    EXPECT_EQ(remove_cached(cache, q8), 0u);
    EXPECT_EQ(remove_cached(cache, parse_model_name("o/r:Q4_K_M")), 2u);  // the .part too, and its folder
    EXPECT_FALSE(fs::exists(repo_dir(cache, repo)));  // only the listing was left: the repository went
    EXPECT_FALSE(fs::exists(cache / "models" / "o"));
    EXPECT_EQ(remove_cached(cache, repo), 0u);
}

}  // namespace
