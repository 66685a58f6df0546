// POST /tokenize and POST /detokenize with llama.cpp's server's shapes: {content, add_special, parse_special,
// with_pieces} -> {tokens}, and {tokens} -> {content}. They read only the vocabulary, so they do not wait for the
// model's turn; a text to tokenize waits for its turn to be prepared (Api::Preparing), as chat requests do.
#include "server/api.h"
#include "server/openai.h"
#include "server/request.h"
#include "tokenizer/unicode.h"

namespace zinc::server {
namespace {

constexpr size_t kStreamPiece = 64 << 10;

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const tokenizer::unicode::Decoded d = tokenizer::unicode::decode_utf8(s, i);
        if (!d.valid) return false;
        i += d.len;
    }
    return true;
}

}  // namespace

void token_routes(http::Server& http, Api& api) {
    http.post("/tokenize", [&api](const http::Request& req, http::Response& res) {
        try {
            const Api::Preparing turn(api);
            const json body = parse_object(req.body);
            if (!body.contains("content") || !body["content"].is_string())
                throw BadRequest("content must be a string", "content");
            const bool special = boolean(body, "add_special", false), parse = boolean(body, "parse_special", true);
            const bool pieces = boolean(body, "with_pieces", false);
            const tokenizer::Tokenizer& tok = api.tokenizer();
            auto ids = std::make_shared<const std::vector<int32_t>>(
                tok.encode(body["content"].get<std::string>(), special, parse));
            // Written as text, a piece at a time: a JSON tree of a million tokens would take a hundred times the
            // request's size, and the whole text of the answer tens of times.
            res.set_stream("application/json", [ids, pieces, &tok](http::Stream& out) {
                std::string buf = "{\"tokens\": [";
                for (size_t i = 0; i < ids->size(); ++i) {
                    if (i) buf += ", ";
                    const int32_t id = (*ids)[i];
                    if (!pieces) {
                        buf += std::to_string(id);
                    } else {
                        // A piece that is part of a character has no string: its bytes, as llama.cpp gives them.
                        const std::string p = tok.token_text(id);
                        json piece = p;
                        if (!valid_utf8(p)) {
                            piece = json::array();
                            for (unsigned char c : p) piece.push_back(int(c));
                        }
                        buf += "{\"id\": " + std::to_string(id) + ", \"piece\": " + text_of(piece) + "}";
                    }
                    if (buf.size() >= kStreamPiece) {
                        if (!out.write(buf)) return;
                        buf.clear();
                    }
                }
                out.write(buf + "]}");
            });
        } catch (const BadRequest& e) {
            error(res, e.status, e.what(), e.param, e.code);
        }
    });

    http.post("/detokenize", [&api](const http::Request& req, http::Response& res) {
        try {
            const Api::Preparing turn(api);
            const json body = parse_object(req.body);
            if (!body.contains("tokens") || !body["tokens"].is_array())
                throw BadRequest("tokens must be a list of token ids", "tokens");
            const tokenizer::Tokenizer& tok = api.tokenizer();
            std::vector<int32_t> ids;
            for (const auto& id : body["tokens"]) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.n_vocab())
                    throw BadRequest("token ids must be integers from 0 to " + std::to_string(tok.n_vocab() - 1),
                                     "tokens");
                ids.push_back(int32_t(id.get<int64_t>()));
            }
            res.set_content(text_of(json{{"content", tok.decode(ids)}}), "application/json");
        } catch (const BadRequest& e) {
            error(res, e.status, e.what(), e.param, e.code);
        }
    });
}

}  // namespace zinc::server
