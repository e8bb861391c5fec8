"""The error tree of rmlprep.

Every error rmlprep raises on purpose derives from :class:`RmlprepError`::

    RmlprepError
    ├── SpecError            (also ValueError)  a TokenizerSpec that Tokenizer.create refuses
    ├── LoaderError          (also ValueError)  a tokenizer file that cannot be read
    │   └── UnsupportedTokenizer                a valid file using a component rmlprep lacks
    ├── TokenizeError        (also ValueError)  text that cannot be encoded (e.g. bad UTF-8 bytes)
    ├── TokenIdError         (also IndexError)  a token id outside the vocabulary
    ├── ChatFormatError      (also ValueError)  unknown format, bad roles, bad messages
    ├── PackingError         (also ValueError)  impossible packing arguments
    ├── RowError             (also ValueError)  one input row that cannot be processed
    ├── ConfigError          (also ValueError)  a run config with a bad or missing key
    ├── InputError           (also ValueError)  a corpus file that cannot be read as a whole
    ├── ParityError                             rmlprep disagrees with a reference
    └── OutputError                             the output folder cannot be used: held by another
                                                run, not writable, full

Messages say where, what, and the fix, e.g.
``f"{path}: merges[{i}] uses {piece!r}, which is not in the vocab"``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "RmlprepError",
    "SpecError",
    "LoaderError",
    "UnsupportedTokenizer",
    "TokenizeError",
    "TokenIdError",
    "ChatFormatError",
    "PackingError",
    "RowError",
    "ConfigError",
    "InputError",
    "ParityError",
    "OutputError",
]


class RmlprepError(Exception):
    """Root of every error rmlprep raises on purpose."""


class SpecError(RmlprepError, ValueError):
    """A TokenizerSpec that Tokenizer.create refuses (the message names the field)."""


class LoaderError(RmlprepError, ValueError):
    """A tokenizer file that cannot be read: malformed, truncated, inconsistent.

    The message starts with the file path; binary formats also give the byte offset.
    """


class UnsupportedTokenizer(LoaderError):
    """A well-formed tokenizer that uses a component rmlprep does not implement.

    The message names the component by its path in the file, e.g.
    ``model.type = 'Unigram' is not supported; rmlprep supports BPE``.
    """


class TokenizeError(RmlprepError, ValueError):
    """Input that cannot be tokenized (for example bytes that are not valid UTF-8)."""


class TokenIdError(RmlprepError, IndexError):
    """A token id outside ``range(vocab_size)``; the message names the id."""


class ChatFormatError(RmlprepError, ValueError):
    """An unknown chat format, or messages that break the format's rules.

    The message names the message index and the rule it breaks.
    """


class PackingError(RmlprepError, ValueError):
    """Packing arguments that cannot work (seq_len < 1, labels not aligned, ...)."""


class RowError(RmlprepError, ValueError):
    """One input row that cannot be processed; carries the row index and the reason."""

    def __init__(self, message: str, *, row: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.row = row
        self.reason = reason or message


class ConfigError(RmlprepError, ValueError):
    """A run config with a bad, missing or unknown key; the message names the key.

    Attributes:
        path: the path a ``... does not exist`` error is about (absolute, as the config
            resolved it), so the run can say how a relative one was resolved
            (:meth:`rmlprep.config.RunConfig.relative_note`); None otherwise.
    """

    def __init__(self, message: str, *, path: str | None = None):
        super().__init__(message)
        self.path = path

    def __reduce__(self):  # keep path across worker processes
        return (_config_error, (self.args[0] if self.args else "", self.path))


def _config_error(message: str, path: str | None) -> ConfigError:
    return ConfigError(message, path=path)


class InputError(RmlprepError, ValueError):
    """A corpus file that cannot be read as a whole (a file-level fault, never a partial read).

    Truncated or corrupt compressed data, a damaged Parquet footer, an unreadable Arrow file, a
    CSV quote that is never closed, a ``datasets`` folder whose JSON is broken. A fault in one
    row is not an InputError: it becomes a reject with the row number.

    The message is one line: the file, the byte offset where known, what is wrong and the fix.

    Attributes:
        path: the file.
        offset: byte offset of the fault in the (compressed) file, or None when unknown.
    """

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset

    def __reduce__(self):  # keep path/offset across worker processes
        return (_input_error, (self.args[0] if self.args else "", self.path, self.offset))


def _input_error(message: str, path: str | None, offset: int | None) -> InputError:
    return InputError(message, path=path, offset=offset)


class ParityError(RmlprepError):
    """rmlprep's ids differ from the reference library's.

    Attributes:
        text: the input text that disagrees.
        position: index of the first differing id.
        expected: the reference ids (a window around ``position`` in the message).
        actual: rmlprep's ids.
        source: what was compared (fixture file, tokenizer name).

    ``message`` replaces the default message (ids around ``position``) when the caller can say
    more, e.g. the chat-format check shows both texts around the first differing character.
    """

    def __init__(
        self,
        text: str,
        position: int,
        expected: Sequence[int],
        actual: Sequence[int],
        *,
        source: str = "",
        message: str | None = None,
    ):
        self.text = text
        self.position = position
        self.expected = list(expected)
        self.actual = list(actual)
        self.source = source
        if message is not None:  # a caller with a better view of the difference (chat text)
            super().__init__(message)
            return
        lo = max(0, position - 3)
        hi = position + 5
        where = f"{source}: " if source else ""
        super().__init__(
            f"{where}ids differ at position {position} for text {text[:120]!r}"
            f"{'...' if len(text) > 120 else ''}: reference {self.expected[lo:hi]} "
            f"vs rmlprep {self.actual[lo:hi]} (ids [{lo}:{hi}]; lengths "
            f"{len(self.expected)} vs {len(self.actual)})"
        )


class OutputError(RmlprepError):
    """The output folder cannot be used: another run holds its lock, it is not writable, the disk
    is full. An environment fault, not a fault of the input: the message names the folder or file,
    the cause and the fix; no half-written file is left under its final name.

    Attributes:
        path: the folder or file concerned.
    """

    def __init__(self, message: str, *, path: str | None = None):
        super().__init__(message)
        self.path = path

    def __reduce__(self):  # keep path across worker processes
        return (_output_error, (self.args[0] if self.args else "", self.path))


def _output_error(message: str, path: str | None) -> "OutputError":
    return OutputError(message, path=path)
