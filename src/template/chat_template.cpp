#include "template/chat_template.h"

#include "template/builtins.h"
#include "template/template.h"

namespace zinc::tmpl {

std::string render_chat(const std::string& template_source, const ChatRequest& request) {
    Template t(template_source);
    Dict vars;
    vars["messages"] = Value::from_json(request.messages);
    // transformers passes tools=None when there are none; None and undefined both test false and
    // only `is defined` tells them apart, which is why a missing list is None here too.
    vars["tools"] = request.tools.is_null() ? Value::none() : Value::from_json(request.tools);
    vars["documents"] = Value::none();
    vars["add_generation_prompt"] = Value(request.add_generation_prompt);
    for (const auto& [k, v] : request.variables.items()) vars[k] = Value::from_json(v);
    if (request.now) vars["strftime_now"] = strftime_now_function(request.now);
    return t.render(vars, request.limits);
}

}  // namespace zinc::tmpl
