// POST /v1/completions: OpenAI's legacy completions. The prompt is text, token ids, or a list of either (each prompt
// gets n choices); the model continues it as plain text (no template, no output parser), stop strings cut it.
#include "server/api.h"
#include "server/constraint.h"
#include "server/openai.h"
#include "server/request.h"

namespace zinc::server {
namespace {

// A prompt's token ids and its text (what echo writes back).
struct Prompt {
    std::vector<int32_t> ids;
    std::string text;
};

Prompt prompt_of(const Api& api, const json& p) {
    const tokenizer::Tokenizer& tok = api.tokenizer();
    Prompt out;
    if (p.is_string()) {
        out.text = p.get<std::string>();
        out.ids = tok.encode(out.text, true, true);
    } else if (p.is_array() && !p.empty() && p[0].is_number()) {
        for (const auto& id : p) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.n_vocab())
                throw BadRequest("token ids must be integers from 0 to " + std::to_string(tok.n_vocab() - 1),
                                 "prompt");
            out.ids.push_back(int32_t(id.get<int64_t>()));
        }
        out.text = tok.decode(out.ids);
    } else {
        throw BadRequest("prompt must be a string, a list of token ids, or a list of either", "prompt");
    }
    if (out.ids.empty()) throw BadRequest("the prompt has no tokens", "prompt");
    check_prompt_length(out.ids.size(), api.n_ctx(), "prompt");
    return out;
}

std::vector<Prompt> prompts_of(const Api& api, const json& body) {
    if (!body.contains("prompt") || body["prompt"].is_null()) throw BadRequest("prompt is needed", "prompt");
    const json& p = body["prompt"];
    std::vector<Prompt> out;
    if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
        for (const auto& one : p) out.push_back(prompt_of(api, one));
    } else {
        out.push_back(prompt_of(api, p));
    }
    return out;
}

class CompletionReply : public Reply {
public:
    CompletionReply(const Api& api, uint64_t request, const std::vector<Prompt>& prompts, int n, bool echo,
                    bool logprobs)
        : api_(api), id_("cmpl-" + std::to_string(request)), created_(unix_time()), logprobs_(logprobs),
          echo_(echo), n_(n) {
        for (const Prompt& p : prompts)
            for (int i = 0; i < n; ++i) {
                Choice c;
                if (echo) c.text = p.text;
                c.offset = c.text.size();
                c.logprobs = completion_logprobs({}, api.tokenizer(), c.offset);
                choices_.push_back(std::move(c));
            }
        for (const Prompt& p : prompts) prompt_tokens_ += int(p.ids.size());
    }

    std::vector<json> opening() override {
        std::vector<json> out;
        for (size_t i = 0; i < choices_.size(); ++i)
            if (echo_) out.push_back(chunk(int(i), choices_[i].text, nullptr, nullptr));
        return out;
    }

    void add(const Update& u, std::vector<json>* chunks) override {
        Choice& c = choices_[size_t(u.choice)];
        std::string text;
        for (const chat::Event& e : u.events) text += e.text;  // plain format: answer text only
        c.text += text;
        json lp = nullptr;
        if (logprobs_) {
            lp = completion_logprobs(u.logprobs, api_.tokenizer(), c.offset);
            extend_completion_logprobs(c.logprobs, lp);
        }
        if (u.final) {
            c.finish = u.finish_reason;
            completion_tokens_ += u.completion_tokens;
            if (u.choice % n_ == 0) cached_tokens_ += u.cached_tokens;  // a prompt's evaluation (the others reuse it)
        }
        if (chunks && (!text.empty() || u.final || !u.logprobs.empty()))
            chunks->push_back(chunk(u.choice, text, lp, u.final ? json(c.finish) : json(nullptr)));
    }

    json whole() override {
        json choices = json::array();
        for (size_t i = 0; i < choices_.size(); ++i)
            choices.push_back({{"index", i},
                               {"text", choices_[i].text},
                               {"logprobs", logprobs_ ? choices_[i].logprobs : json(nullptr)},
                               {"finish_reason", choices_[i].finish}});
        return {{"id", id_},
                {"object", "text_completion"},
                {"created", created_},
                {"model", api_.name},
                {"choices", choices},
                {"usage", usage(prompt_tokens_, completion_tokens_, cached_tokens_)}};
    }

    json usage_event() override {
        json u = chunk(0, "", nullptr, nullptr);
        u["choices"] = json::array();
        u["usage"] = usage(prompt_tokens_, completion_tokens_, cached_tokens_);
        return u;
    }

private:
    struct Choice {
        std::string text;
        json logprobs;
        size_t offset = 0;  // where the next token's text begins in text
        std::string finish;
    };

    json chunk(int choice, const std::string& text, const json& logprobs, const json& finish) const {
        return {
            {"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", api_.name},
            {"choices",
             json::array({{{"index", choice}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
    }

    const Api& api_;
    std::string id_;
    int64_t created_;
    bool logprobs_, echo_;
    int n_;  // choices of each prompt
    std::vector<Choice> choices_;
    int prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
};

}  // namespace

void completion_routes(http::Server& http, Api& api) {
    http.post("/v1/completions", [&api](const http::Request& req, http::Response& res) {
        Job job;
        std::shared_ptr<CompletionReply> reply;
        bool stream = false, include_usage = false;
        try {
            const Api::Preparing turn(api);
            const json body = parse_object(req.body);
            const std::vector<Prompt> prompts = prompts_of(api, body);
            for (const Prompt& p : prompts) job.prompts.push_back(p.ids);
            job.n = int(integer(body, "n", 1, api.opt.limits.max_n, 1));
            if (integer(body, "best_of", 1, api.opt.limits.max_n, job.n) != job.n)
                throw BadRequest("best_of other than n is not supported", "best_of");
            if (job.choices() > api.opt.limits.max_n)
                throw BadRequest("prompts times n must be at most " + std::to_string(api.opt.limits.max_n), "n");
            if (body.contains("suffix") && !body["suffix"].is_null() &&
                !(body["suffix"].is_string() && body["suffix"].get<std::string>().empty()))
                throw BadRequest("suffix is not supported", "suffix");
            job.max_tokens = max_tokens(body, api.opt.limits);
            job.sampling = sampling(body, api.opt.sampling, api.n_ctx(), api.tokenizer());
            job.stops = stop_strings(body);
            job.grammar = constraint(body);
            job.top_logprobs = int(integer(body, "logprobs", 0, api.opt.limits.max_logprobs, -1));
            const bool echo = boolean(body, "echo", false);
            if (echo && job.top_logprobs >= 0)
                throw BadRequest("echo with logprobs (the prompt's log-probabilities) is not supported", "echo");
            stream = boolean(body, "stream", false);
            include_usage = stream_usage(body);
            job.deadline = Clock::now() + std::chrono::seconds(api.opt.timeout_seconds);
            reply = std::make_shared<CompletionReply>(api, api.next_request++, prompts, job.n, echo,
                                                      job.top_logprobs >= 0);
        } catch (const BadRequest& e) {
            return error(res, e.status, e.what(), e.param, e.code);
        }
        answer(api, req, res, std::move(job), std::move(reply), stream, include_usage);
    });
}

}  // namespace zinc::server
