"""The Chat Completions wire format (OpenAI-compatible endpoints), with no I/O: request bodies, a conversation's
messages, and a checked response as a neutral ModelReply. pipeline/models/openai.py sends them."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from pipeline.core.schema import Usage
from pipeline.models.base import UNPARSED_ARGUMENTS, LLMError, ModelReply, ToolUse, Turn

# The neutral stop reasons the steps act on, from Chat Completions' finish_reason as servers spell it: "" (Snowflake,
# on every normal completion), "eos" and "eos_token" (llama.cpp, TGI), "model_length" (Mistral, at the context size).
_STOP = {"stop": "end_turn", "": "end_turn", "eos": "end_turn", "eos_token": "end_turn", "stop_sequence": "end_turn",
         "end_turn": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "tool_use": "tool_use",
         "length": "max_tokens", "model_length": "max_tokens", "max_tokens": "max_tokens"}
# Reasoning that some models put in `content` before the answer (Qwen3 on Groq, DeepSeek-R1 and its distills).
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
# What an assistant turn sends back: OpenRouter asks for reasoning_details to be returned within a tool loop.
_SENT_BACK = ("role", "content", "tool_calls", "reasoning_details")


class Malformed(Exception):
    """A 2xx answer whose body is not a chat completion."""


class ErrorBody(Exception):
    """A 2xx answer that carries an error instead of a completion (OpenRouter relays its providers' errors so)."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def request_body(*, model: str, messages: list[dict[str, Any]], max_tokens: int,
                 tools: Sequence[dict[str, Any]] | None = None, tool_choice: dict[str, Any] | None = None,
                 response_format: dict[str, Any] | None = None,
                 max_tokens_key: str = "max_tokens") -> dict[str, Any]:
    """The request kwargs; tools (neutral {name, description, input_schema}) become functions, keys sorted."""
    body: dict[str, Any] = {"model": model, "messages": list(messages), max_tokens_key: max_tokens}
    if tools:
        # Sorted keys: callers building the same tool dict in a different order must not change the cached prefix.
        body["tools"] = [{"type": "function", "function": json.loads(json.dumps(
            {"name": t["name"], "description": t.get("description", ""), "parameters": t["input_schema"]},
            sort_keys=True))} for t in tools]
    if tool_choice:  # the neutral {"type": "tool", "name": ...} / {"type": "any"} forms
        kind = tool_choice.get("type")
        body["tool_choice"] = ({"type": "function", "function": {"name": tool_choice["name"]}} if kind == "tool"
                               else "required" if kind == "any" else "auto")
    if response_format:
        body["response_format"] = response_format
    return body


def conversation(system: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Turns as Chat Completions messages: the system prompt, then each reply as it came (without a server's extra
    fields), exactly one tool message per tool call, in order, then the note."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for turn in turns:
        if isinstance(turn, str):
            messages.append({"role": "user", "content": turn})
        elif isinstance(turn, ModelReply):
            messages.append(_assistant(turn))
        else:
            messages += [{"role": "tool", "tool_call_id": r.tool_use_id, "content": r.content} for r in turn.results]
            if turn.note:
                messages.append({"role": "user", "content": turn.note})
    return messages


def _assistant(reply: ModelReply) -> dict[str, Any]:
    """The assistant message to send back: its text and its tool calls with their argument text unchanged."""
    sent = reply.provider_turn[0] if reply.provider_turn else {}
    calls = [{"id": use.id, "type": "function",
              "function": {"name": use.name, "arguments": _argumentstext_of(sent, i, use)}}
             for i, use in enumerate(reply.tool_uses)]
    extra = {"reasoning_details": sent["reasoning_details"]} if sent.get("reasoning_details") else {}
    if calls:
        return {"role": "assistant", "content": reply.text or None, "tool_calls": calls, **extra}
    return {"role": "assistant", "content": reply.text or "(no reply)", **extra}  # servers refuse an empty turn


def _argumentstext_of(sent: dict[str, Any], i: int, use: ToolUse) -> str:
    calls = sent.get("tool_calls") or []
    arguments = calls[i].get("function", {}).get("arguments") if i < len(calls) else None
    return arguments if isinstance(arguments, str) else json.dumps(use.input)


def as_reply(data: dict[str, Any], model: str, usage: Usage, request_id: str | None) -> ModelReply:
    """A checked chat completion as a neutral reply; a refusal or a content filter raises LLMError."""
    choice = data["choices"][0]
    message = choice["message"]
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        raise LLMError("refusal", "the model declined to answer this request; rephrase it or leave out the part it "
                                  "refused")
    uses = [ToolUse(id=call.get("id") or _call_id(call, i), name=call["function"]["name"],
                    input=_arguments(call["function"].get("arguments")))
            for i, call in enumerate(message.get("tool_calls") or [])]
    finish = choice.get("finish_reason")
    if finish is None or not isinstance(finish, str):
        finish = ""
    stop = _STOP.get(finish.strip().lower(), finish)
    if uses and stop != "max_tokens":  # a tool call cut at the limit is no call: the step is told to be brief
        stop = "tool_use"
    kept = {k: message[k] for k in _SENT_BACK if k in message}
    return ModelReply(model=str(data.get("model") or model), stop_reason=stop, provider_turn=[kept],
                      text=without_thinking(text_of(message.get("content"))), tool_uses=uses, usage=usage,
                      request_id=request_id)


def without_thinking(text: str) -> str:
    """`text` without a leading reasoning block: <think>...</think>, or reasoning closed by a </think> that was never
    opened (a chat template that opens it in the prompt); a block never closed is all reasoning (cut at the limit)."""
    head = text.lstrip()
    if head.startswith(_THINK_OPEN):
        end = head.find(_THINK_CLOSE)
        return "" if end < 0 else head[end + len(_THINK_CLOSE):].lstrip()
    end = text.find(_THINK_CLOSE)
    if end >= 0 and _THINK_OPEN not in text[:end]:
        return text[end + len(_THINK_CLOSE):].lstrip()
    return text


def _arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments; text that is not a JSON object is passed on for the tool to refuse with a message."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {UNPARSED_ARGUMENTS: str(raw)[:2000]}


def _call_id(call: dict[str, Any], i: int) -> str:
    """A stable id for a tool call a server sent without one (every tool message must name its call)."""
    seed = json.dumps([i, call.get("function")], sort_keys=True, default=str)
    return "call_" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def count(value: Any) -> int | None:
    """A token count as reported, or None when it is not a whole number of tokens."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# Where servers report the prompt tokens read from their prefix cache, first found wins: OpenAI and most others
# (prompt_tokens_details.cached_tokens), DeepSeek (prompt_cache_hit_tokens), Mistral (num_cached_tokens), Moonshot
# (cached_tokens), LiteLLM's proxy (cache_read_input_tokens). And the ones written to it, which a relay of Anthropic's
# models bills at the cache-write price: OpenRouter (prompt_tokens_details.cache_write_tokens), LiteLLM
# (cache_creation_input_tokens). Each is a part of prompt_tokens.
_CACHE_READ = (("prompt_tokens_details", "cached_tokens"), ("prompt_cache_hit_tokens",), ("num_cached_tokens",),
               ("cached_tokens",), ("cache_read_input_tokens",))
_CACHE_WRITE = (("prompt_tokens_details", "cache_write_tokens"), ("cache_creation_input_tokens",))


def cache_counts(usage: dict[str, Any], prompt: int) -> tuple[int, int]:
    """The prompt tokens a reply's usage says were read from and written to the server's cache, within `prompt`."""
    read = min(_first_count(usage, _CACHE_READ), prompt)
    return read, min(_first_count(usage, _CACHE_WRITE), prompt - read)


def _first_count(usage: dict[str, Any], paths: Sequence[tuple[str, ...]]) -> int:
    for path in paths:
        value: Any = usage
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        found = count(value)
        if found:
            return found
    return 0


def without_credentials(url: str) -> str:
    """`url` without a user name and password, for messages and records."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host).geturl()


def error_detail(error: dict[str, Any]) -> str:
    """An error object's message on one bounded line, with the upstream reason a relay keeps in `metadata.raw`
    (OpenRouter says only "Provider returned error" and puts "temporarily rate-limited upstream" there)."""
    said = str(error.get("message") or error.get("code") or "no detail")
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if raw:
        upstream = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
        provider = metadata.get("provider_name") if isinstance(metadata, dict) else None
        named = f"{provider}: " if isinstance(provider, str) and provider else ""
        said += f" ({named}{upstream[:1000]})"
    return " ".join(said[:2000].split())[:300]


def completion_json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise Malformed("a body that is not JSON") from None
    if isinstance(data, dict) and isinstance(data.get("error"), dict) and not data.get("choices"):
        # OpenRouter may answer 200 with the upstream provider's error, e.g. {"error": {"code": 429, ...}}.
        error = data["error"]
        code = error.get("code")
        raise ErrorBody(code if isinstance(code, int) and 400 <= code < 600 else 502, error_detail(error))
    choices = data.get("choices") if isinstance(data, dict) else None
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict)):
        raise Malformed("JSON without choices[0].message")
    message = choices[0]["message"]
    if not (message.get("content") is None or isinstance(message["content"], (str, list))):
        raise Malformed("a message whose content is neither text nor null")
    calls = message.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(
            isinstance(c, dict) and isinstance(c.get("function"), dict) and isinstance(c["function"].get("name"), str)
            and (c.get("id") is None or isinstance(c["id"], str)) for c in calls)):
        raise Malformed("tool calls without a function name or with an id that is not text")
    if choices[0].get("finish_reason") == "error":
        raise ErrorBody(502, "the provider behind the endpoint failed while answering")
    return data
