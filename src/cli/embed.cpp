// `zinc embed`: the embedding of each text, as OpenAI's embeddings answer (JSON) or as rows of numbers.
#include <charconv>
#include <cstdio>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/embed.h"
#include "gguf/printable.h"

namespace zinc::cli {
namespace {

struct EmbedArgs {
    ModelFlags model;
    std::vector<std::string> texts;
    std::string file;
    std::string pooling;  // empty: the file's
    bool normalize = true;
    std::string format = "json";
};

// The texts: each -p, or each line of -f (a final newline ends the last line).
std::vector<std::string> read_texts(const EmbedArgs& o) {
    if (o.file.empty()) return o.texts;
    std::vector<std::string> texts;
    std::istringstream in(read_file(o.file));
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        texts.push_back(line);
    }
    return texts;
}

// One vector as text: numbers separated by spaces, each the float's shortest decimal.
std::string row_text(std::span<const float> v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
        if (i) s += ' ';
        s.append(buf, r.ptr);
    }
    return s + "\n";
}

nlohmann::ordered_json row_json(std::span<const float> v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (float x : v) a.push_back(engine::json_number(x));
    return a;
}

void run_embed(const EmbedArgs& o) {
    std::vector<std::string> texts = read_texts(o);
    if (texts.empty()) throw CLI::ValidationError("no text", "give texts with -p TEXT (repeatable) or -f FILE");
    engine::OpenedModel om = open_model(o.model);
    engine::Session& s = *om.session;
    const engine::Pooling pooling =
        o.pooling.empty() ? engine::file_pooling(*om.model) : *engine::parse_pooling(o.pooling);
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) throw std::invalid_argument("text " + std::to_string(i + 1) + " is empty");
        // As llama.cpp tokenizes an embedding's input: the vocabulary's BOS and EOS (Qwen3-Embedding pools the
        // state of the EOS it appends), control tokens read as tokens.
        ids.push_back(s.tokenizer().encode(texts[i], true, true));
        if (ids.back().empty()) throw std::invalid_argument("text " + std::to_string(i + 1) + " has no tokens");
        if (int64_t(ids.back().size()) > s.n_ctx())
            throw std::length_error("text " + std::to_string(i + 1) + " has " + std::to_string(ids.back().size()) +
                                    " tokens but the context holds " + std::to_string(s.n_ctx()) +
                                    "; give a larger --ctx-size (the model was trained on " +
                                    std::to_string(om.plan.n_ctx_train) + ") or a shorter text");
    }
    if (o.model.verbose) {
        std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
        std::fprintf(stderr, "zinc: %zu texts, pooling %s%s\n", texts.size(), engine::pooling_name(pooling),
                     o.normalize ? ", normalized" : "");
    }
    engine::Embedder e(s.family(), *om.backend, pooling, {0});
    for (auto& t : ids) e.add(std::move(t));
    e.run();
    s.clear();  // the family's state no longer holds what the session held

    const size_t width = size_t(e.n_embd());
    nlohmann::ordered_json data = nlohmann::ordered_json::array();
    int64_t tokens = 0;
    for (size_t i = 0; i < e.size(); ++i) {
        std::vector<float> v = e.result(i);
        tokens += int64_t(e.tokens(i));
        // Pooling none gives a row per token, each normalized on its own.
        if (o.normalize)
            for (size_t r = 0; r < v.size(); r += width) engine::normalize(std::span<float>(v).subspan(r, width));
        if (o.format == "text") {
            for (size_t r = 0; r < v.size(); r += width)
                write_out(row_text(std::span<const float>(v).subspan(r, width)));
            continue;
        }
        nlohmann::ordered_json item;
        item["object"] = "embedding";
        item["index"] = i;
        if (pooling == engine::Pooling::none) {
            item["embedding"] = nlohmann::ordered_json::array();
            for (size_t r = 0; r < v.size(); r += width)
                item["embedding"].push_back(row_json(std::span<const float>(v).subspan(r, width)));
        } else {
            item["embedding"] = row_json(v);
        }
        data.push_back(std::move(item));
    }
    if (o.format == "text") return;
    nlohmann::ordered_json out;
    out["object"] = "list";
    out["data"] = std::move(data);
    out["model"] = om.model->first().path();
    out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
    write_out(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

void register_embed(CLI::App& app) {
    auto o = std::make_shared<EmbedArgs>();
    auto* cmd = app.add_subcommand("embed", "Print the embedding of each text");
    add_model_options(cmd, o->model);
    auto* texts = cmd->add_option("-p,--prompt", o->texts, "a text (repeatable: one embedding each)");
    cmd->add_option("-f,--file", o->file, "read the texts from a file, one a line ('-': standard input)")
        ->excludes(texts);
    cmd->add_option("--pooling", o->pooling,
                    "none (a vector per token), mean, cls (the first token's) or last (the last token's); default: "
                    "the file's <arch>.pooling_type, none where it has none")
        ->transform(one_of("a pooling", {"none", "mean", "cls", "last"}));
    cmd->add_flag("--normalize,!--no-normalize", o->normalize,
                  "scale each vector to Euclidean length 1 (default; as sentence-transformers' Normalize)");
    cmd->add_option("--format", o->format,
                    "json (OpenAI's embeddings answer; pooling none gives each text an array of token vectors) or "
                    "text (a line of numbers per vector)")
        ->capture_default_str()
        ->transform(one_of("a format", {"json", "text"}));
    cmd->callback([o] { run_embed(*o); });
}

}  // namespace zinc::cli
