"""The ``rmlprep`` command line: parses arguments and calls library functions, nothing more.

Exit codes: 0 success; 2 a user mistake or an environment fault (bad config, missing or
damaged input file, unreadable tokenizer, an output folder that is held by another run, not
writable or full: one line, no traceback); 3 a parity failure (rmlprep's ids differ from the
reference; the report names text, position and both id runs); 130 interrupted (Ctrl-C), 143
terminated (SIGTERM), 129 hung up (SIGHUP; :mod:`.cli_signals`), each with one line; 1 only for an
unexpected internal error (with traceback: a bug to report). :func:`main` is the one place that
maps errors to exit codes and their one line.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from ._version import __version__
from .streams import reports_never_stop_a_run
from .cli_commands import cmd_chat, cmd_inspect, cmd_parity, log as _log, open_tokenizer_arg as _open, write_text
from .cli_signals import Stopped, signals_unwind
from .cli_text import argv_text, stdin_text
from .config import RunConfig, load_config
from .config_paths import tidy_paths
from .errors import InputError, ParityError, RmlprepError
from .pipeline import run
from .pipeline.verdict import drop_warning, reject_share_warning, rejected_files_warning, run_verdict

__all__ = ["main", "build_parser"]

TOKENIZER_HELP = ("tokenizer.json (or its directory), sentencepiece .model, GGUF, tiktoken rank file "
                  "(with --name), a *.spec.json, or demo:gpt2")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rmlprep",
        description="Turn text and chat corpora into packed token-id Parquet shards with an exact tokenizer.",
        epilog="Start with: rmlprep run configs/demo.toml   (exit codes: 0 ok, 2 user error, 3 parity failure)",
    )
    p.add_argument("--version", action="version", version=f"rmlprep {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser("run", help="run a TOML config: read → parity → tokenize → pack → shards",
                       description="Run a pipeline config. Relative paths in the config resolve against the "
                                   "current directory. A rerun into the same output skips verified done units.")
    r.add_argument("config", help="a TOML config, e.g. configs/demo.toml")
    r.add_argument("--workers", type=int, help="worker processes (default: run.workers, 0 = all cores)")
    r.add_argument("--output", help="output directory (overrides output.dir)")
    r.add_argument("--resume", action="store_true", help="continue a previous run (done units are verified and skipped)")
    r.add_argument("--overwrite", action="store_true", help="replace shards of a different config in the output directory; in a folder "
                        "rmlprep did not write, write beside files it does not name (never replaced)")
    r.add_argument("--engine", choices=["local", "ray"],
                   help="local: a process pool on this machine; ray: Ray tasks on a local Ray or the cluster "
                        "in run.ray_address (pip install 'rmlprep[ray]'). Same shards either way "
                        "(default: run.engine)")
    r.add_argument("--max-reject-fraction", type=float, metavar="F",
                   help="exit 2 when more than this share of the rows read is rejected (default: "
                        "run.max_reject_fraction, 0.1; 1 never)")

    e = sub.add_parser("encode", help="encode text to token ids")
    e.add_argument("tokenizer", help=TOKENIZER_HELP)
    e.add_argument("text", nargs="?", help="text to encode (default, or -: read stdin; encode the text \"-\" "
                                                "through stdin)")
    e.add_argument("--name", help="encoding name for tiktoken rank files (gpt2, llama3, ...)")
    e.add_argument("--add-special-tokens", action="store_true",
                   help="add the bos/eos the tokenizer file adds, as its reference library's encode does: a "
                        "tokenizer.json's post-processor (or tokenizer_config.json), a GGUF's add_bos_token; a "
                        "SentencePiece .model or a tiktoken file adds none (sentencepiece and tiktoken add none "
                        "unless asked); `rmlprep inspect` shows add_bos/add_eos")
    e.add_argument("--no-parse-special", action="store_true",
                   help="encode special tokens' text ('<|endoftext|>' etc.) as plain text; user-defined tokens "
                        "(inspect's user_defined_tokens: Qwen2.5's <tool_call>) stay one id, as in tokenizers. "
                        "The default when the folder's tokenizer_config.json sets split_special_tokens: true, "
                        "as in transformers")
    e.add_argument("--json", action="store_true", help="print a JSON list instead of space-separated ids")

    d = sub.add_parser("decode", help="decode token ids to text")
    d.add_argument("tokenizer", help=TOKENIZER_HELP)
    d.add_argument("ids", nargs="*", help="ids, integers (default, or -: read whitespace/comma separated ids from "
                                            "stdin); a negative id after --: refused as out of range")
    d.add_argument("--name", help="encoding name for tiktoken rank files")
    d.add_argument("--skip-special-tokens", action="store_true")
    d.add_argument("-n", "--no-newline", action="store_true",
                   help="write the decoded text exactly, without the newline that ends the output")

    i = sub.add_parser("inspect", help="describe a tokenizer (kind, vocab, special ids, fingerprint)")
    i.add_argument("tokenizer", help=TOKENIZER_HELP)
    i.add_argument("--name", help="encoding name for tiktoken rank files")

    c = sub.add_parser("chat", help="format a messages JSON file with a chat format (optionally encode it)")
    c.add_argument("messages", help='JSON file: [{"role": ..., "content": ...}, ...] or {"messages": [...]} '
                                "(-: read stdin)")
    c.add_argument("--format", required=True, help="chat format name (chatml, llama3, ...) or a Jinja template file; "
                   "with --tokenizer also auto (the format proved on its chat template) or template (that template)")
    c.add_argument("--tokenizer", help="also encode with this tokenizer and print ids and the assistant mask")
    c.add_argument("--name", help="encoding name for tiktoken rank files")
    c.add_argument("--add-generation-prompt", action="store_true")
    c.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a chat option, as chat.options in a run (repeatable): enable_thinking=false, "
                        "reasoning_effort=high, today=2025-03-01...; VALUE is read as a TOML value (true, false, a "
                        "number, a date, a quoted string), else taken as text")
    c.add_argument("--text-markers", action="store_true",
                   help="with --tokenizer: encode a format whose turn terminator is not a special token of the "
                        "tokenizer, its markers as text (refused by default: a model trained so learns no stop token)")
    c.add_argument("--join-text-parts", metavar="SEP",
                   help="join a content of two or more text parts with SEP ('\\n', typed as backslash n: vLLM's "
                        "join; '': as templates that iterate parts) where the format's template takes only a string "
                        "(refused by default: that template has no join; chat.join_text_parts in a run)")
    c.add_argument("-n", "--no-newline", action="store_true",
                   help="write the formatted text exactly, without the newline that ends the output")

    q = sub.add_parser("parity", help="check a tokenizer (or a chat format) against references, or make a fixture",
                       description="Without --make-fixture: check the tokenizer against its fixture (given, or found "
                                   "in fixtures/parity/ by the file's sha256) and, when installed, the reference "
                                   "library on built-in texts. With --make-fixture OUT: write the reference "
                                   "library's ids for those texts to OUT. With --chat FORMAT: check only the chat "
                                   "format against real template renders (fixtures/chat/renders.jsonl.gz): the "
                                   "TOKENIZER's own chat_template when its sha256 is there, else every template "
                                   "the format writes.")
    q.add_argument("tokenizer", nargs="?", help=TOKENIZER_HELP + " (optional with --chat)")
    q.add_argument("--name", help="encoding name for tiktoken rank files")
    q.add_argument("--fixture", help="fixture JSON to check against")
    q.add_argument("--make-fixture", metavar="OUT", help="write a new fixture from the reference library")
    q.add_argument("--texts", help="JSONL file with {\"text\": ...} lines to use instead of the built-in texts")
    q.add_argument("--chat", metavar="FORMAT", help="check this chat format (chatml, llama3, ... or a Jinja template "
                                                    "file) instead of the tokenizer")
    q.add_argument("--chat-renders", metavar="FILE", help="renders JSONL to check --chat against "
                                                          "(default: fixtures/chat/renders.jsonl.gz)")
    return p


def _cmd_run(a) -> int:
    cfg = load_config(a.config, output=a.output).with_overrides(workers=a.workers, output=a.output, engine=a.engine,
                                               max_reject_fraction=a.max_reject_fraction)
    return _run_config(cfg, resume=a.resume, overwrite=a.overwrite)


def run_exit_status(config: RunConfig | Callable[[], RunConfig], *, resume: bool = False,
                    overwrite: bool = False) -> int:
    """Run a job as ``rmlprep run`` does and return its exit status, for a script's ``main``
    (``pipelines/pretrain.py``, ``pipelines/sft.py``): 0 when the shards hold a document
    (``shards: DIR`` on stdout); 2 for a user error (:class:`~rmlprep.errors.RmlprepError`, a
    refused file, out of memory), an empty dataset (every row rejected, or no row at all: no
    success) or rejects over ``run.max_reject_fraction`` of the rows read
    (:func:`rmlprep.pipeline.verdict.run_verdict`); 3 for a parity failure; 130 on Ctrl-C, 143 on SIGTERM, 129 on SIGHUP. Each failure is one line
    on stderr, never a traceback.

    Args:
        config: the run's config, or a callable building it (its ConfigError is exit 2 too).
        resume, overwrite: as :func:`rmlprep.pipeline.run`'s.
    """
    def job() -> int:
        cfg = config() if callable(config) else config
        return _run_config(cfg, resume=resume, overwrite=overwrite)

    with signals_unwind():
        with reports_never_stop_a_run():
            return _exit_status(job, stream=False)


def _run_config(cfg: RunConfig, *, resume: bool, overwrite: bool) -> int:
    try:
        manifest = run(cfg, resume=resume, overwrite=overwrite, log=_log)
    except KeyboardInterrupt as e:  # Ctrl-C, Stopped: its line says whether a unit is done (_stopped_run)
        e.rmlprep_output = cfg.output_dir
        raise
    tidy = tidy_paths(cfg)  # the manifest's '/p/sub/../data/x.jsonl' shown as '/p/data/x.jsonl', as run's lines
    why = run_verdict(cfg, manifest)  # no document, or rejects over run.max_reject_fraction: exit 2, no "shards:"
    if why is not None:
        _log(f"rmlprep: error: {tidy(why)}")
        return 2
    if (warn := drop_warning(manifest)) is not None:  # a success, but most documents left out
        _log(f"rmlprep: warning: {tidy(warn)}")
    if (warn := rejected_files_warning(manifest)) is not None:  # a success, but a file wholly rejected
        _log(f"rmlprep: warning: {tidy(warn)}")
    if (warn := reject_share_warning(manifest)) is not None:  # or a file's share of rejects over the run's limit
        _log(f"rmlprep: warning: {tidy(warn)}")
    print(f"shards: {cfg.output_dir}")
    return 0


def _cmd_encode(a) -> int:
    tok, _ = _open(a.tokenizer, a.name)
    text = argv_text(a.text) if a.text not in (None, "-") else stdin_text()  # "-": stdin, as cat and iconv take it
    ids = tok.encode(text, add_special_tokens=a.add_special_tokens, parse_special=False if a.no_parse_special else None)
    if a.add_special_tokens and not (tok.spec.add_bos or tok.spec.add_eos):
        # a Llama 2 tokenizer.model adds no BOS here, as sentencepiece's encode adds none, while the
        # same model's Hugging Face tokenizer.json adds one: say so rather than add nothing silently
        src = Path(a.tokenizer).expanduser()
        if src.suffix == ".json" or (src / "tokenizer.json").is_file():  # already the Hugging Face file
            why = "its post_processor adds none, as Hugging Face tokenizers' encode gives"
        else:
            why = ("as its reference library's encode; a SentencePiece .model or tiktoken file never does; give the "
                   "model's tokenizer.json for Hugging Face's bos/eos")
        _log(f"rmlprep: note: --add-special-tokens added nothing: this tokenizer file adds no bos/eos ({why})")
    print(json.dumps(ids) if a.json else " ".join(map(str, ids)))
    return 0


def _parse_ids(words: list[str], where: str) -> list[int]:
    """Token ids from command-line words or stdin text: integers separated by whitespace or
    commas, brackets ignored (``15496 11``, ``[15496, 11]``).

    Raises:
        InputError: a value that is not an integer, named (argparse's own message for it
            was two lines of usage, or "unrecognized arguments" after an option).
    """
    ids = []
    for w in " ".join(words).replace(",", " ").replace("[", " ").replace("]", " ").split():
        try:
            ids.append(int(w))
        except ValueError:
            raise InputError(f"decode: {w!r} {where} is not a token id; ids are integers "
                             "(separated by spaces or commas)") from None
    return ids


def _cmd_decode(a) -> int:
    ids = _parse_ids(a.ids, "on the command line") if a.ids and a.ids != ["-"] else None  # "-": stdin
    tok, _ = _open(a.tokenizer, a.name)
    if ids is None:
        ids = _parse_ids([sys.stdin.read()], "on stdin")
    write_text(tok.decode(ids, skip_special_tokens=a.skip_special_tokens), a.no_newline)
    return 0


def _one_line(msg: str) -> str:
    return " ".join(msg.splitlines()) if "\n" in msg else msg


_COMMANDS = {"run": _cmd_run, "encode": _cmd_encode, "decode": _cmd_decode, "inspect": cmd_inspect,
             "chat": cmd_chat, "parity": cmd_parity}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse stops filling positionals at the first option, so "encode TOK --name gpt2 TEXT"
    # leaves TEXT over: give it to the positional it was meant for
    if extra and args.command == "encode" and args.text is None:
        words, options = _leftover_words(extra, negative_ids=False)
        if not options:
            args.text, extra = " ".join(words), []
    elif args.command == "decode" and extra:  # ids after an option: every word but an option is an id
        words, extra = _leftover_words(extra, negative_ids=True)
        args.ids = [*args.ids, *words]
    if extra:  # the command's own usage, not the top level's (trial19: encode --tokenizer T)
        (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    with signals_unwind():
        return _run_command(args)


def _leftover_words(extra: list[str], *, negative_ids: bool) -> tuple[list[str], list[str]]:
    """``extra`` (what ``parse_known_args`` left over) split into positional words and unknown
    options. A lone ``-`` is a word (stdin, as cat and iconv take it: ``encode TOK --name gpt2 -``
    left it over and was refused as an unrecognized argument), so is every word after ``--``
    (argparse leaves the ``--`` itself over when it comes after an option) and, with
    ``negative_ids``, ``-1`` (refused later as an out-of-range id, one line naming it)."""
    words: list[str] = []
    options: list[str] = []
    for k, x in enumerate(extra):
        if x == "--":
            words.extend(extra[k + 1:])
            break
        if x == "-" or not x.startswith("-") or (negative_ids and x.lstrip("-").isdigit()):
            words.append(x)
        else:
            options.append(x)
    return words, options


def _run_command(args) -> int:
    """Run a parsed command; map its errors to an exit code and one line."""
    if args.command != "run":
        return _exit_status(lambda: _COMMANDS[args.command](args))
    with reports_never_stop_a_run():
        return _exit_status(lambda: _COMMANDS[args.command](args), stream=False)


def _stopped_run(e: KeyboardInterrupt) -> str:
    """What a stopped run's line adds: the done units stay (markers in the output folder, after
    the unwinding dropped what it had set aside: pipeline.previous), or, stopped before any
    (its config not loaded yet, or a local folder with no ``shard-*.done.json``, or none at
    all), that there is nothing to continue. A store's folder is not listed on the way out."""
    out = getattr(e, "rmlprep_output", None)
    if out is None or isinstance(out, Path) and not any(out.glob("shard-*.done.json")):
        return "; no unit was done: rerun the command"
    return "; the done units stay and --resume continues"


def _exit_status(job: Callable[[], int], *, stream: bool = True) -> int:
    """``job()``'s status, or the exit code and one line of what it raised (the CLI's mapping,
    shared by :func:`run_exit_status`). A closed stdout pipe ends a ``stream`` command (``encode
    ... | head``: the reader has what it wanted) with 0, and a run with 2: its shards are not all
    written. A stop signal's line speaks of done units for a run only (``stream`` False)."""
    try:
        return job()
    except Stopped as e:  # SIGTERM, SIGHUP: 128 + the signal, as a shell reports a process it ended
        with suppress(OSError):  # a hung-up terminal may take no more
            _log(f"rmlprep: {e.words}" + ("" if stream else _stopped_run(e)))
        return 128 + e.signum
    except ParityError as e:  # source "unit": a unit's live chat sample (pipeline.driver), after others were written
        _log(f"rmlprep: parity failure, stopped {'in a unit' if e.source == 'unit' else 'before any corpus work'}: {e}")
        return 3
    except RmlprepError as e:
        _log(f"rmlprep: error: {_one_line(str(e))}")
        return 2
    except BrokenPipeError:  # `rmlprep encode ... | head`: the reader left, nothing went wrong
        if stream:
            return 0
        _log("rmlprep: error: standard output was closed (the reader of a pipe left) before the run ended; "
             "the done units stay and --resume continues")
        return 2
    except OSError as e:  # the system refused a file (missing, permission, I/O, full): environment
        where = f"{e.filename}: " if e.filename else ""
        _log(f"rmlprep: error: {where}{_one_line(e.strerror or str(e))}")
        return 2
    except MemoryError as e:  # numpy's "Unable to allocate ..." or a bare one: the run's sizes, not a bug to trace
        what = _one_line(str(e)) or "an allocation failed"
        _log(f"rmlprep: error: out of memory: {what} (a smaller pack.seq_len, input.unit_bytes or run.workers "
             "needs less)")
        return 2
    except KeyboardInterrupt as e:  # a run's line says what SIGTERM's says of the done units
        _log("rmlprep: interrupted" + ("" if stream else _stopped_run(e)))
        return 130


def entry() -> None:
    """The ``rmlprep`` command (through :func:`rmlprep.console.entry`, and ``python -m rmlprep.cli``):
    :func:`main` on ``sys.argv``, then
    exit with its status.

    On the way out every object is moved to the collector's permanent generation
    (``gc.freeze``), so the garbage collections of interpreter shutdown skip them: they walked
    the loaded tokenizer's objects and the run's, 0.06-0.09 s of a ~1 s ``rmlprep run`` on the
    main job (bench/README.md). Objects are still freed one by one, ``atexit`` handlers run and
    files are closed as usual; only garbage kept alive by reference cycles is left for the
    operating system to reclaim with the process. :func:`main` itself never does this (a
    library or test calling it keeps its collector as it was).

    Standard output is UTF-8 whatever the locale, as rmlprep reads its input: under one whose
    encoding is not UTF-8 (``LC_ALL=C`` with Python's UTF-8 mode off: ASCII) ``decode`` and
    ``chat`` died writing a non-ASCII character with a UnicodeEncodeError
    traceback, exit 1. The error handler is kept (``surrogateescape`` there: a file name's bytes
    come out as they came in).
    """
    out = sys.stdout
    if out is not None and hasattr(out, "reconfigure") and (out.encoding or "").lower().replace("-", "") != "utf8":
        out.reconfigure(encoding="utf-8", errors=out.errors)
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
