// POST /v1/embeddings: OpenAI's embeddings. `input` is a text, a list of texts, a list of token ids or a list of such
// lists; each becomes one vector, the model's final-normed hidden states pooled as the server pools them (--pooling,
// else the file's), then cut to `dimensions` and scaled to length 1 (unless --no-normalize). The vectors come back as
// JSON numbers or, with encoding_format "base64", as the base64 of their little-endian float32 bytes.
#include <cstring>

#include "server/api.h"
#include "server/openai.h"
#include "server/request.h"

namespace zinc::server {
namespace {

// The inputs' token ids: texts tokenized as llama.cpp's server does for embeddings (the vocabulary's BOS and EOS added,
// control tokens read as tokens), token ids checked against the vocabulary. Throws BadRequest for an input that is
// empty or longer than the context, and for more inputs or tokens than the limits allow (413 for the tokens).
std::vector<std::vector<int32_t>> embedding_inputs(const Api& api, const json& body) {
    if (!body.contains("input") || body["input"].is_null()) throw BadRequest("input is needed", "input");
    const json& in = body["input"];
    const tokenizer::Tokenizer& tok = api.tokenizer();
    const Limits& lim = api.opt.limits;
    const char* shape = "input must be a string, a list of strings, a list of token ids or a list of lists of them";
    // One input of either form.
    const auto one = [&](const json& x) {
        std::vector<int32_t> ids;
        if (x.is_string()) {
            if (x.get_ref<const std::string&>().empty()) throw BadRequest("an input is an empty string", "input");
            ids = tok.encode(x.get<std::string>(), true, true);
        } else if (x.is_array()) {
            for (const auto& id : x) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.n_vocab())
                    throw BadRequest("token ids must be integers from 0 to " + std::to_string(tok.n_vocab() - 1),
                                     "input");
                ids.push_back(int32_t(id.get<int64_t>()));
            }
        } else {
            throw BadRequest(shape, "input");
        }
        if (ids.empty()) throw BadRequest("an input has no tokens", "input");
        if (int64_t(ids.size()) > api.n_ctx())
            throw BadRequest("an input has " + std::to_string(ids.size()) + " tokens; the context holds " +
                                 std::to_string(api.n_ctx()) + " (inputs are not cut)",
                             "input", "context_length_exceeded");
        return ids;
    };
    std::vector<json> items;  // the inputs, each a string or a list of ids
    if (in.is_string() || (in.is_array() && !in.empty() && in[0].is_number())) {
        items.push_back(in);
    } else if (in.is_array() && !in.empty()) {
        if (in.size() > size_t(lim.max_inputs))
            throw BadRequest("input has " + std::to_string(in.size()) + " items; at most " +
                                 std::to_string(lim.max_inputs) + " are taken at once",
                             "input");
        const bool strings = in[0].is_string();
        for (const auto& x : in) {
            if (strings ? !x.is_string() : !x.is_array()) throw BadRequest(shape, "input");
            items.push_back(x);
        }
    } else {
        throw BadRequest(in.is_array() ? "input is an empty list" : shape, "input");
    }
    std::vector<std::vector<int32_t>> out;
    int64_t total = 0;
    for (const json& x : items) {
        out.push_back(one(x));
        total += int64_t(out.back().size());
        if (total > lim.max_embedding_tokens)  // refused before the rest is tokenized
            throw BadRequest("the inputs have more than " + std::to_string(lim.max_embedding_tokens) +
                                 " tokens together, the most one request may have",
                             "input", "", 413);
    }
    return out;
}

std::string base64_of(const unsigned char* p, size_t n) {
    static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string s;
    s.reserve((n + 2) / 3 * 4);
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t b = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) |
                           (i + 2 < n ? uint32_t(p[i + 2]) : 0);
        s += kDigits[b >> 18 & 63];
        s += kDigits[b >> 12 & 63];
        s += i + 1 < n ? kDigits[b >> 6 & 63] : '=';
        s += i + 2 < n ? kDigits[b & 63] : '=';
    }
    return s;
}

// A vector as OpenAI's base64 form: its float32 values as little-endian bytes.
std::string base64_floats(const std::vector<float>& v) {
    std::vector<unsigned char> bytes(v.size() * 4);
    for (size_t i = 0; i < v.size(); ++i) {
        uint32_t u;
        std::memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; ++k) bytes[i * 4 + size_t(k)] = (u >> (8 * k)) & 0xff;
    }
    return base64_of(bytes.data(), bytes.size());
}

class EmbeddingReply : public Reply {
public:
    EmbeddingReply(const Api& api, size_t inputs, int64_t dimensions, bool base64)
        : api_(api), dimensions_(dimensions), base64_(base64), vectors_(inputs) {}

    std::vector<json> opening() override { return {}; }

    void add(const Update& u, std::vector<json>*) override {
        std::vector<float> v = u.embedding;
        // Cut first, then scaled: the first dimensions of a Matryoshka-trained model are an embedding of their own.
        if (dimensions_ > 0 && size_t(dimensions_) < v.size()) v.resize(size_t(dimensions_));
        if (api_.opt.embd_normalize) engine::normalize(v);
        vectors_.at(size_t(u.choice)) = std::move(v);
        prompt_tokens_ += u.prompt_tokens;
    }

    json whole() override {
        json data = json::array();
        for (size_t i = 0; i < vectors_.size(); ++i) {
            json e;
            e["object"] = "embedding";
            e["index"] = i;
            if (base64_) {
                e["embedding"] = base64_floats(vectors_[i]);
            } else {
                json a = json::array();
                for (float x : vectors_[i]) a.push_back(engine::json_number(x));
                e["embedding"] = std::move(a);
            }
            data.push_back(std::move(e));
        }
        return {{"object", "list"},
                {"data", std::move(data)},
                {"model", api_.name},
                {"usage", {{"prompt_tokens", prompt_tokens_}, {"total_tokens", prompt_tokens_}}}};
    }

    json usage_event() override { return nullptr; }  // never streamed

private:
    const Api& api_;
    int64_t dimensions_;  // 0: the model's
    bool base64_;
    std::vector<std::vector<float>> vectors_;
    int prompt_tokens_ = 0;
};

}  // namespace

void embedding_routes(http::Server& http, Api& api) {
    http.post("/v1/embeddings", [&api](const http::Request& req, http::Response& res) {
        Job job;
        std::shared_ptr<EmbeddingReply> reply;
        try {
            if (!api.no_embeddings.empty()) throw BadRequest(api.no_embeddings, "");
            const Api::Preparing turn(api);
            const json body = parse_object(req.body);
            const std::string format = body.contains("encoding_format") && !body["encoding_format"].is_null()
                                           ? text(body, "encoding_format")
                                           : "float";
            if (format != "float" && format != "base64")
                throw BadRequest("encoding_format must be \"float\" or \"base64\"", "encoding_format");
            const int64_t n_embd = api.model.session->family().n_embd();
            int64_t dimensions = 0;
            if (body.contains("dimensions") && !body["dimensions"].is_null()) {
                // Only a vector scaled to length 1 again after the cut is an embedding of fewer dimensions.
                if (!api.opt.embd_normalize)
                    throw BadRequest("dimensions needs normalized embeddings, and this server gives them as pooled "
                                     "(--no-normalize)",
                                     "dimensions");
                dimensions = integer(body, "dimensions", 1, n_embd, n_embd);
            }
            job.prompts = embedding_inputs(api, body);
            job.embed = api.pooling;
            job.deadline = Clock::now() + std::chrono::seconds(api.opt.timeout_seconds);
            reply = std::make_shared<EmbeddingReply>(api, job.prompts.size(), dimensions, format == "base64");
        } catch (const BadRequest& e) {
            return error(res, e.status, e.what(), e.param, e.code);
        }
        answer(api, req, res, std::move(job), std::move(reply), false, false);
    });
}

}  // namespace zinc::server
