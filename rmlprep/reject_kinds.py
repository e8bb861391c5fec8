"""The reject records' ``kind``: a stable name for why a row was rejected, beside its
``reason`` (a sentence that carries the row's details: positions, lengths, field names).

A reject's ``kind`` does not change from version to version when a reason's wording does;
``manifest.json``'s ``rejects.by_kind`` counts them. Readers give their row errors as
:class:`Reason` (a ``str`` carrying its kind, so code that reads reasons as text is
unchanged); the pipeline's stages name the kind where they reject.
"""

from __future__ import annotations

__all__ = ["KINDS", "Reason", "kind_of"]

#: kind -> what it means. Stage ``read``: the reader could not parse the row; ``validate``: a
#: value of the wrong type or shape; ``format``, ``tokenize``, ``pack``: as the stages say.
KINDS: dict[str, str] = {
    # read
    "not_utf8": "the row's bytes are not valid UTF-8",
    "not_json": "a JSONL line that is not valid JSON",
    "two_json_objects": "a JSONL line holding two JSON objects (files concatenated without a newline)",
    "not_an_object": "a JSONL line whose JSON is not an object",
    "duplicate_key": "a JSON object holding a key twice",
    "too_deep": "JSON nested deeper than the limit",
    "unconvertible_value": "a JSON value Python cannot convert (a number of too many digits)",
    "line_too_long": "a line longer than the reader's byte limit",
    "bad_whitespace": "a line of whitespace JSON does not allow (form feed, vertical tab)",
    "missing_field": "no such field in the row (input.column)",
    "csv_field_count": "a CSV record with another number of fields than the header",
    "csv_repeated_header": "a CSV record of the header's column names again (files concatenated with their headers)",
    "bad_json_text": "an Arrow JSON-text value that is not valid JSON",
    # validate
    "null": "the value is null",
    "binary": "the value is bytes (a binary column), not a string",
    "wrong_type": "the value is of another type than the pipeline takes (a number or list for text)",
    "messages_schema": "a conversation outside the messages schema",
    "tools_schema": "a tool definitions value outside the schema",
    "system_prompt": "a system prompt column value that the messages contradict",
    "unread_field": "the row holds a field the run would not read (tools, system prompt, media)",
    # later stages
    "format_refused": "the chat format cannot write the conversation",
    "tokenizer_refused": "the tokenizer refuses the text",
    "over_long_dropped": "a document longer than pack.seq_len that pack.overflow = \"drop\" leaves out",
    "trains_nothing": "a conversation pack.overflow = \"truncate\" would cut before its first assistant token",
    "other": "a reason given without a kind (none of rmlprep's own: the tests check every stage's)",
}


class Reason(str):
    """A reject reason (the text) with its :data:`KINDS` name in ``kind``.

    >>> r = Reason("line is not valid JSON (Expecting value at column 1)", "not_json")
    >>> (r.startswith("line is"), r.kind)
    (True, 'not_json')
    """

    __slots__ = ("kind",)

    def __new__(cls, text: str, kind: str) -> "Reason":
        if kind not in KINDS:  # a programming error
            raise ValueError(f"unknown reject kind {kind!r}")
        self = super().__new__(cls, text)
        self.kind = kind
        return self

    def __reduce__(self):
        return Reason, (str(self), self.kind)


def kind_of(reason: str, default: str) -> str:
    """The kind of ``reason``: its own when it is a :class:`Reason`, else ``default``."""
    return getattr(reason, "kind", default)
