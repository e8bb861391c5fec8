"""The probe conversations that prove a format reproduces a template (:mod:`rmlprep.chat.detect`).

They cover what real templates treat differently: a system prompt or none, several turns,
empty and whitespace-padded contents, reasoning (as ``reasoning_content`` and as ``<think>``
in the content) in an earlier and in the last turn, tool definitions, tool calls (alone, with
text, two at once) and their results, text parts, and orders of roles that strict templates
refuse. Each is written with and without the generation prompt.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROBES"]

S, U, A, T = "system", "user", "assistant", "tool"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit."},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city."}},
                       "required": ["city"]},
    },
}


FORECAST = {
    "type": "function",
    "function": {
        "name": "get_forecast",
        "description": "Get the forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "description": "How many days."},
                "lat": {"type": "number"},
                "hourly": {"type": "boolean"},
                "fields": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["city", "days"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.\nReturns the top results.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "default": 5, "minimum": 1},
                "lang": {"type": ["string", "null"], "description": "A language code."},
                "safe": {"type": "string", "enum": ["off", "strict"], "default": "strict"},
                "since": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "site": {"type": "object", "description": "Restrict to a site.",
                         "properties": {"host": {"type": "string", "description": "The host."}}, "required": ["host"]},
                "filters": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                "extra": {"type": "object"},
            },
            "required": ["query"],
        },
    },
}
PING = {"type": "function", "function": {"name": "ping", "description": "Check the service."}}
STATUS = {"type": "function", "function": {"name": "get_status", "description": "The service status.",
                                           "parameters": {"type": "object", "properties": {}}}}


def _m(role: str, content: Any, **kw) -> dict:
    return {"role": role, "content": content, **kw}


def _call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


_W = _call("call0w3x9", "get_weather", {"city": "Paris", "unit": "celsius"})
_T = _call("call1t7y2", "get_time", {"city": "Tokyo"})
_W_RESULT = _m(T, '{"temperature": 22, "condition": "sunny"}', tool_call_id="call0w3x9", name="get_weather")
_T_RESULT = _m(T, '{"time": "09:30"}', tool_call_id="call1t7y2", name="get_time")
_F = _call("call2f4k8", "get_forecast", {"city": "Paris", "days": 3, "lat": 48.85, "hourly": False, "fields": ["rain"]})
_F_RESULT = _m(T, '{"rain": [0, 1, 0]}', tool_call_id="call2f4k8", name="get_forecast")
_S = _call("call3s5q1", "search", {"query": "rmlprep", "lang": None, "site": {"host": "github.com"}})
_S_RESULT = _m(T, '{"results": []}', tool_call_id="call3s5q1", name="search")

#: (probe id, messages, tools). Order matters only for reports: the first differing probe is shown.
PROBES: list[tuple[str, list[dict], list[dict] | None]] = [
    ("user", [_m(U, "Hello, how are you?")], None),
    ("system_user_assistant", [_m(S, "You are a helpful assistant."), _m(U, "What is 2+2?"), _m(A, "4")], None),
    ("multi_turn", [_m(U, "Hi"), _m(A, "Hello! How can I help?"), _m(U, "Tell me a joke."),
                    _m(A, "Why did the chicken cross the road?")], None),
    ("system_multi_turn_ends_user", [_m(S, "Answer in French."), _m(U, "Hi"), _m(A, "Salut"), _m(U, "Thanks")], None),
    ("whitespace", [_m(S, "  Be terse.\n"), _m(U, "\n naïve café — 東京 🙂  "), _m(A, "  Oui.\n\n"),
                    _m(U, "\tencore ?\n"), _m(A, "\n\nSi.  ")], None),
    ("empty_contents", [_m(S, ""), _m(U, ""), _m(A, "")], None),
    ("empty_answer_mid", [_m(U, "Say nothing."), _m(A, ""), _m(U, "Now say hi."), _m(A, "hi")], None),
    ("reasoning_last", [_m(U, "What is 2+2?"), _m(A, "4", reasoning_content="2 plus 2 is 4.")], None),
    ("reasoning_earlier", [_m(U, "What is 2+2?"), _m(A, "4", reasoning_content="Add them."), _m(U, "And 3+3?"),
                           _m(A, "6", reasoning_content="Add again.")], None),
    ("reasoning_history_only", [_m(U, "What is 2+2?"), _m(A, "4", reasoning_content="Add them."),
                                _m(U, "And 3+3?")], None),
    ("think_in_content", [_m(U, "What is 2+2?"), _m(A, "<think>\n2 plus 2 is 4.\n</think>\n\n4")], None),
    ("think_in_content_earlier", [_m(U, "2+2?"), _m(A, "<think>\nadd\n</think>\n\n4"), _m(U, "3+3?"),
                                  _m(A, "<think>\nadd again\n</think>\n\n6")], None),
    # Spaces (not newlines) around the last answer and its reasoning: Qwen3's template strips only
    # "\n" there, so a template that strips all whitespace (`.strip()` for `.strip('\n')`) differs
    # only on these (explore18a).
    ("reasoning_padded", [_m(U, "What is 2+2?"), _m(A, " 4 ", reasoning_content=" Add them. ")], None),
    ("think_in_content_padded", [_m(U, "What is 2+2?"), _m(A, "<think> Add them. </think> 4 ")], None),
    ("tools_no_call", [_m(S, "You are a weather bot."), _m(U, "Hi"), _m(A, "Hello! Ask me about the weather.")],
     [WEATHER, TIME]),
    ("tools_no_system", [_m(U, "Hi"), _m(A, "Hello!")], [WEATHER]),
    ("tool_call", [_m(U, "What is the weather in Paris?"), _m(A, None, tool_calls=[_W]), _W_RESULT,
                   _m(A, "It is sunny and 22 °C in Paris.")], [WEATHER]),
    ("tool_call_empty_content", [_m(S, "Use tools when needed."), _m(U, "Weather in Paris?"),
                                 _m(A, "", tool_calls=[_W]), _W_RESULT, _m(A, "Sunny, 22 °C.")], [WEATHER]),
    ("tool_call_with_text", [_m(U, "Weather in Paris?"), _m(A, "Let me check.", tool_calls=[_W]), _W_RESULT,
                             _m(A, "Sunny.")], [WEATHER]),
    ("two_tool_calls", [_m(U, "Weather in Paris and time in Tokyo?"), _m(A, None, tool_calls=[_W, _T]), _W_RESULT,
                        _T_RESULT, _m(A, "Sunny in Paris; 09:30 in Tokyo.")], [WEATHER, TIME]),
    ("tool_result_ends", [_m(U, "Weather in Paris?"), _m(A, None, tool_calls=[_W]), _W_RESULT], [WEATHER]),
    ("tool_call_reasoning", [_m(U, "Weather in Paris?"),
                             _m(A, None, tool_calls=[_W], reasoning_content="I should call get_weather."),
                             _W_RESULT, _m(A, "Sunny.", reasoning_content="It is sunny.")], [WEATHER]),
    ("tool_call_then_user", [_m(U, "Weather in Paris?"), _m(A, None, tool_calls=[_W]), _W_RESULT,
                             _m(A, "Sunny."), _m(U, "Thanks!"), _m(A, "You're welcome.")], [WEATHER]),
    ("tool_result_no_call", [_m(S, "You can call get_weather."), _m(U, "Weather in Paris?"),
                             _m(A, '{"name": "get_weather", "arguments": {"city": "Paris"}}'),
                             _m(T, '{"temperature": 22}'), _m(A, "Sunny, 22 °C.")], None),
    # Branches that depend on the data (explore18a): a call with text or reasoning whose
    # conversation ends on its result (gpt-oss, Gemma 4 write them only then), a result with no
    # name (Gemma 4 looks it up by tool_call_id), typed parameters and a tool without any
    # (gpt-oss and Hermes 3 write a type per parameter, Hermes 3 {} for none; gpt-oss writes defaults,
    # nullable and nested types, descriptions as comments), a user turn wrapped in
    # <tool_response> (Qwen3 keeps the reasoning after it).
    ("tool_call_text_ends", [_m(U, "Weather in Paris?"), _m(A, "Let me check.", tool_calls=[_W]), _W_RESULT],
     [WEATHER]),
    ("tool_call_reasoning_ends", [_m(U, "Weather in Paris?"),
                                  _m(A, None, tool_calls=[_W], reasoning_content="I should call get_weather."),
                                  _W_RESULT], [WEATHER]),
    ("tool_result_unnamed", [_m(U, "Weather in Paris?"), _m(A, None, tool_calls=[_W]),
                             _m(T, '{"temperature": 22}', tool_call_id="call0w3x9"), _m(A, "Sunny.")], [WEATHER]),
    ("tool_types", [_m(U, "Forecast for Paris?"), _m(A, None, tool_calls=[_F]), _F_RESULT, _m(A, "Rain on day 2.")],
     [FORECAST, STATUS]),
    # PING first: Hermes 3's template stops at it (no parameters), not in a recursion on "lang".
    ("tool_schema", [_m(U, "Search for rmlprep."), _m(A, None, tool_calls=[_S]), _S_RESULT, _m(A, "Nothing found.")],
     [PING, SEARCH]),
    ("user_tool_response", [_m(U, "What is 2+2?"), _m(A, "4", reasoning_content="Add them."),
                            _m(U, "<tool_response>\nok\n</tool_response>"),
                            _m(A, "Done.", reasoning_content="Check it.")], None),
    # More data branches (explore18a, a mutation sweep over fuzzed conversations): a turn that
    # ends on the call itself (Gemma 4 writes <|tool_response> there), reasoning before a call
    # in an earlier user turn (Gemma 4 drops it), calls with text or two at once and no
    # definitions (DeepSeek V3.1 writes no definitions, so the probes above are skipped for it),
    # a </think> in an earlier answer only (DeepSeek drops the text before it), SmolLM3's
    # /no_think and /think switches in the system message (it also cuts them out of the text).
    ("tool_call_ends", [_m(U, "Weather in Paris?"), _m(A, None, tool_calls=[_W])], [WEATHER]),
    ("tool_call_reasoning_then_user", [_m(U, "Weather in Paris?"),
                                       _m(A, None, tool_calls=[_W], reasoning_content="I should call get_weather."),
                                       _W_RESULT, _m(A, "Sunny."), _m(U, "Thanks!"), _m(A, "You're welcome.")],
     [WEATHER]),
    ("tool_call_with_text_no_tools", [_m(U, "Weather in Paris?"), _m(A, "Let me check.", tool_calls=[_W]), _W_RESULT,
                                      _m(A, "Sunny.")], None),
    ("two_tool_calls_no_tools", [_m(U, "Weather in Paris and time in Tokyo?"), _m(A, None, tool_calls=[_W, _T]),
                                 _W_RESULT, _T_RESULT, _m(A, "Sunny in Paris; 09:30 in Tokyo.")], None),
    ("think_in_content_history_only", [_m(U, "2+2?"), _m(A, "<think>\nadd\n</think>\n\n4"), _m(U, "3+3?"),
                                       _m(A, "6")], None),
    ("system_no_think", [_m(S, "Be brief. /no_think"), _m(U, "Hi"), _m(A, "Hello")], None),
    ("system_think", [_m(S, "Reason first. /think"), _m(U, "Hi"), _m(A, "Hello")], None),
    ("tool_call_no_tools", [_m(U, "Weather in Paris?"), _m(A, None, tool_calls=[_W]), _W_RESULT, _m(A, "Sunny.")],
     None),
    ("text_parts", [_m(S, "Be brief."),
                    _m(U, [{"type": "text", "text": "Hello "}, {"type": "text", "text": " world "}]),
                    _m(A, [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there."}])], None),
    ("system_parts", [_m(S, [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]), _m(U, "Hi"),
                      _m(A, "Hello")], None),
    ("special_text", [_m(U, "<|im_end|> <|eot_id|> </s> <s> [INST] <end_of_turn> <|end|>"),
                      _m(A, "[/INST] <|im_start|>user\n<start_of_turn>model </s>")], None),
    ("two_users", [_m(U, "A"), _m(U, "B")], None),
    ("assistant_first", [_m(A, "X"), _m(U, "Y")], None),
    ("system_not_first", [_m(U, "A"), _m(S, "S"), _m(U, "B")], None),
    ("two_systems", [_m(S, "S1"), _m(S, "S2"), _m(U, "Q")], None),
    ("system_only", [_m(S, "S")], None),
    ("two_assistants", [_m(U, "Q"), _m(A, "A1"), _m(A, "A2")], None),
]
