"""A server's error that no retry can change, named with its cause and its fix.

Servers spell these differently and some send them as 500s (llama.cpp's server answers a
chat template that fails to render, or a request it cannot take, with a 500): the engine
would retry each, then record the text missing with "raise --max-attempts". `permanent`
reads the status and message and, for the errors below, gives one line naming the cause
and the fix; the caller marks the attempt not retryable.
"""

from __future__ import annotations

import re

# (pattern over the lower-cased message, cause, fix), most specific first.
PERMANENT: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"exceed_context_size|exceeds the available context|maximum context length|context length"),
     "the prompt is longer than the server's context",
     "start the server with a larger context (llama-server -c N, vLLM --max-model-len N); "
     "a longer text gets no output, never a truncation"),
    (re.compile(r"model .*(does not exist|not found)|unknown model|no such model"),
     "the server does not serve this model name",
     "give the served name (GET /v1/models lists them) as --model"),
    (re.compile(r"typeerror|jinja|chat template|template error|can only concatenate|"
                r"expected 'content' to be a string"),
     "the server's chat template cannot render this request",
     "serve a model whose template takes it, or send plain-string content "
     "(Llama Guard presets: options: {content: text})"),
    (re.compile(r"unrecognized request argument|extra inputs are not permitted|unknown field|"
                r"additional properties"),
     "the server does not take a request field margin sent",
     "a family's vLLM fields (chat_template_kwargs, add_generation_prompt, skip_special_tokens, "
     "reasoning_effort) need a server that takes them (vLLM, llama.cpp's server); a request_options "
     "key needs one that knows it"),
    (re.compile(r"image input is not supported|multimodal|mmproj"),
     "the server cannot take this kind of input",
     "send text only (Llama Guard presets: options: {content: text})"),
)


def permanent(status: int | None, message: str) -> str | None:
    """`cause (fix)` for an error that no retry can change, else None. Only 4xx and 500
    are read: 502-504 and 429 are a server or proxy passing trouble."""
    if status is None or not (400 <= status < 500 or status == 500) or status in (408, 409, 429):
        return None
    text = message.casefold()
    for pattern, cause, fix in PERMANENT:
        if pattern.search(text):
            return f"{cause}: {fix}"
    return None
