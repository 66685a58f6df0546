// `zinc pull owner/repo[:QUANT]`, `zinc list` and `zinc rm`: models by name, kept in the cache of hub/cache.h.
#include "cli/pull.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/printable.h"
#include "hub/cache.h"
#include "hub/pull.h"

namespace zinc::cli {
namespace {

hub::ModelName model_name(const std::string& flag, const std::string& text) {
    try {
        return hub::parse_model_name(text);
    } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError(flag, e.what());
    }
}

double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One progress line a file: a bar, the share, the bytes and the speed of this run. `quiet_when_cached`: a file
// already whole in the cache shows nothing (-hf), rather than a line saying so (pull).
class PullProgress {
public:
    explicit PullProgress(bool quiet_when_cached) : quiet_when_cached_(quiet_when_cached) {}

    void update(const hub::RepoFile& f, uint64_t done, bool last) {
        if (f.path != path_) {
            line_.reset();
            path_ = f.path;
            start_done_ = done;
            start_time_ = seconds_now();
            if (last) {  // whole from the start: the cache had it
                if (!quiet_when_cached_)
                    std::fprintf(stderr, "%s: in the cache (%s)\n", gguf::printable(f.path, 200).c_str(),
                                 size_text(f.size).c_str());
                return;
            }
            line_ = std::make_unique<ProgressLine>(gguf::printable(f.path, 200));
        }
        if (!line_) return;
        // A file that takes less than a second shows its last line only.
        if (!last && seconds_now() - start_time_ < 1.0) return;
        constexpr int kWidth = 24;
        const double share = f.size ? double(done) / double(f.size) : 1.0;
        const int filled = static_cast<int>(share * kWidth);
        std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, ' ') + "]";
        const double secs = seconds_now() - start_time_;
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s %3d%% %s of %s, %.1f MiB/s", bar.c_str(), int(share * 100),
                      size_text(done).c_str(), size_text(f.size).c_str(),
                      secs > 0 ? double(done - std::min(done, start_done_)) / secs / double(1 << 20) : 0.0);
        line_->update(buf, last);
        if (last) line_.reset();
    }

    // Ends a bar left open on a terminal, so that a note starts on a line of its own.
    void break_line() {
        if (line_) line_->finish();
    }

private:
    bool quiet_when_cached_;
    std::string path_;
    uint64_t start_done_ = 0;
    double start_time_ = 0;
    std::unique_ptr<ProgressLine> line_;
};

hub::Pulled pull(const hub::ModelName& name, bool quiet_when_cached) {
    auto progress = std::make_shared<PullProgress>(quiet_when_cached);
    hub::PullEvents ev;
    ev.progress = [progress](const hub::RepoFile& f, uint64_t done, bool last) { progress->update(f, done, last); };
    ev.note = [progress](const std::string& line) {
        progress->break_line();
        std::fprintf(stderr, "zinc: %s\n", line.c_str());
    };
    return hub::pull_model(name, ev);
}

void list_models() {
    const hub::fs::path cache = hub::cache_dir();
    const std::vector<hub::CachedModel> models = hub::cached_models(cache);
    if (models.empty()) {
        std::fprintf(stderr, "zinc: no models in the cache (%s)\n", cache.string().c_str());
        return;
    }
    std::vector<std::array<std::string, 3>> rows = {{"NAME", "SIZE", "FILE"}};
    for (const hub::CachedModel& m : models) {
        std::string file = gguf::printable(m.path, 200);
        if (m.count > 1) file += " (" + std::to_string(m.files) + " of " + std::to_string(m.count) + " files)";
        if (m.partial) file += " (partial: 'zinc pull' finishes it)";
        rows.push_back({gguf::printable(m.repo_id + (m.tag.empty() ? "" : ":" + m.tag), 200), size_text(m.bytes),
                        file});
    }
    size_t w0 = 0, w1 = 0;
    for (const auto& r : rows) {
        w0 = std::max(w0, r[0].size());
        w1 = std::max(w1, r[1].size());
    }
    std::string out;
    for (const auto& r : rows)
        out += r[0] + std::string(w0 + 2 - r[0].size(), ' ') + r[1] + std::string(w1 + 2 - r[1].size(), ' ') + r[2] +
               "\n";
    write_out(out);
}

}  // namespace

std::string pulled_model_path(const std::string& text) {
    const hub::Pulled p = pull(model_name("--hf-repo", text), true);
    return p.files.front().string();
}

void register_pull(CLI::App& app) {
    auto name = std::make_shared<std::string>();
    auto* pull_cmd = app.add_subcommand(
        "pull", "Download a GGUF model from Hugging Face into the cache, by name (owner/repo or owner/repo:QUANT)");
    pull_cmd->add_option("name", *name,
                         "owner/repo[:QUANT]: the repository's file naming QUANT (any case), else Q4_K_M, else Q8_0, "
                         "else its first GGUF; every shard of a split model. HF_ENDPOINT and HF_TOKEN as for "
                         "llama.cpp; the cache is ZINC_CACHE (default ~/.cache/zinc)")
        ->required();
    pull_cmd->footer("Prints the path of the model's (first) file. An interrupted download resumes; every file is "
                     "checked against the repository's sha256. See docs/hub.md.");
    pull_cmd->callback([name] {
        const hub::ModelName n = model_name("name", *name);
        const hub::Pulled p = pull(n, false);
        uint64_t bytes = 0;
        for (const auto& f : p.files) bytes += hub::fs::file_size(f);
        std::fprintf(stderr, "zinc: %s: %zu file%s, %s%s\n", n.text().c_str(), p.files.size(),
                     p.files.size() == 1 ? "" : "s", size_text(bytes).c_str(),
                     p.offline ? " (from the cache, not checked with the hub)" : "");
        write_out(p.files.front().string() + "\n");
    });

    auto* list_cmd = app.add_subcommand("list", "List the models in the cache (ZINC_CACHE, default ~/.cache/zinc)");
    list_cmd->callback([] { list_models(); });

    auto rm_name = std::make_shared<std::string>();
    auto* rm_cmd = app.add_subcommand("rm", "Remove a model from the cache: owner/repo (all its files) or "
                                            "owner/repo:QUANT (the files naming QUANT)");
    rm_cmd->add_option("name", *rm_name, "owner/repo[:QUANT], as 'zinc list' shows it")->required();
    rm_cmd->callback([rm_name] {
        const hub::ModelName n = model_name("name", *rm_name);
        const hub::fs::path cache = hub::cache_dir();
        const size_t removed = hub::remove_cached(cache, n);
        if (removed == 0)
            throw std::runtime_error(n.text() + " is not in the cache (" + cache.string() + "); 'zinc list' shows "
                                     "what is");
        std::fprintf(stderr, "zinc: removed %s (%zu file%s)\n", n.text().c_str(), removed, removed == 1 ? "" : "s");
    });
}

}  // namespace zinc::cli
