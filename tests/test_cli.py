"""The rmlprep command line: help, exit codes, no tracebacks for user mistakes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmlprep.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
needs_tiny = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def cli(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "rmlprep.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, input=stdin, timeout=120)


def test_help():
    r = cli("--help")
    assert r.returncode == 0
    for cmd in ("run", "encode", "decode", "inspect", "chat", "parity"):
        assert cmd in r.stdout
    r = cli("run", "--help")
    assert r.returncode == 0 and "--workers" in r.stdout and "--resume" in r.stdout


def test_python_m_rmlprep_is_the_command(tmp_path):
    """``python -m rmlprep`` runs the console script (its scripts folder need not be on PATH);
    it printed "No module named rmlprep.__main__" with exit 1, neither of the CLI's codes."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "rmlprep", "--version"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("rmlprep "), r.stderr
    r = subprocess.run([sys.executable, "-m", "rmlprep", "frobnicate"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 2 and "usage: rmlprep" in r.stderr


def test_usage_error_exit_2():
    assert cli().returncode == 2
    assert cli("frobnicate").returncode == 2


def test_missing_config_no_traceback(tmp_path):
    r = cli("run", str(tmp_path / "nope.toml"))
    assert r.returncode == 2
    assert "no such config file" in r.stderr and "Traceback" not in r.stderr


def test_unknown_key_named(tmp_path):
    c = tmp_path / "c.toml"
    c.write_text('[input]\npaths=["x.jsonl"]\nbatch=3\n')
    r = cli("run", str(c))
    assert r.returncode == 2 and "unknown key 'input.batch'" in r.stderr and "Traceback" not in r.stderr


def test_parity_of_a_gguf_without_fixture_names_why():
    """A GGUF without a fixture has no live reference: the message said to pip install the three
    reference libraries, installed or not (found in a fresh-user trial)."""
    g = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", "~/.cache/rmlprep-real-tokenizers")).expanduser() \
        / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not g.exists():
        pytest.skip(f"{g} is absent (bash ../shared/real-tokenizers/get.sh)")
    r = cli("parity", str(g))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "a GGUF file has no live reference library" in r.stderr and "pip install" not in r.stderr


@needs_tiny
def test_parity_failure_exit_3(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello"}\n')
    fx = json.loads(TINY.read_text())
    next(c for c in fx["cases"] if c["ids"])["ids"][0] += 1
    (tmp_path / "fx.json").write_text(json.dumps(fx))
    c = tmp_path / "c.toml"
    c.write_text(f'[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n[parity]\nfixture="fx.json"\n'
                 '[pack]\nseq_len=8\n[output]\ndir="out"\n')
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "parity failure" in r.stderr and "position" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "train-00000.parquet").exists()


@needs_tiny
def test_run_relative_output_under_cwd(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"text": "hello world"}\n{"text": "again"}\n')
    (tmp_path / "c.toml").write_text(f'[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n'
                                     '[pack]\nseq_len=8\n[output]\ndir="out/x"\n[run]\nworkers=1\n')
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "x" / "train-00000.parquet").exists()
    assert "summary" in r.stderr and str(tmp_path / "out" / "x") in r.stdout


@needs_tiny
def test_run_refuses_an_output_folder_whose_name_is_not_utf8(tmp_path):
    """``--output out-$'\\xe9'`` (a Latin-1 byte in the folder's name: Python decodes it as U+DCE9)
    wrote every shard and marker, then failed writing the dataset card with a UnicodeEncodeError
    traceback, exit 1 (explorer7 F7). It is refused before any work, naming the key."""
    (tmp_path / "d.jsonl").write_text('{"text": "hello world"}\n')
    (tmp_path / "c.toml").write_text(f'[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n'
                                     '[pack]\nseq_len=8\n[output]\ndir="out"\n[run]\nworkers=1\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LC_ALL="C.UTF-8")
    out = bytes(tmp_path) + b"/out-\xe9"
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", "c.toml", "--output", out],
                       capture_output=True, env=env, cwd=tmp_path, timeout=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and "Traceback" not in err, err
    assert "--output: " in err and "holds bytes that are not UTF-8" in err and err.count("\n") == 1
    assert not os.path.exists(out)
    utf8 = bytes(tmp_path) + "/out-é".encode()
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", "c.toml", "--output", utf8],
                       capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr


@needs_tiny
@pytest.mark.parametrize("data, message", [
    pytest.param("hello world".encode("utf-16"), "stdin is UTF-16-LE (byte-order mark at byte 0)", id="utf-16"),
    pytest.param(b"caf\xe9 au lait", "stdin: byte 3: not valid UTF-8", id="latin-1"),
])
def test_encode_stdin_refuses_what_is_not_utf8(monkeypatch, capsys, data, message):
    """``rmlprep encode`` reads stdin as the readers read files: UTF-8 only. A UTF-16 file piped
    in was encoded as U+FFFD U+FFFD and a NUL token after every letter, a Latin-1 byte as U+FFFD,
    with exit 0. Worked example: b"caf\xe9" has its first invalid byte at offset 3."""
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["encode", str(TINY)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Hello 123".encode())))
    assert main(["encode", str(TINY), "--json"]) == 0
    assert main(["encode", str(TINY), "--json", "Hello 123"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == out[1]


@needs_tiny
def test_encode_argument_refuses_what_is_not_utf8():
    """A text argument is held to stdin's rule. Python decodes argv with surrogateescape, so the
    Latin-1 byte of ``$'caf\\xe9'`` reached the tokenizer as U+DCE9 and was encoded as U+FFFD,
    exit 0 (explorer7: Qwen3 gave ``68796 5691``, the ids of ``caf\\ufffd``), where the same
    bytes on stdin are refused. Worked example: b"caf\\xe9" has its first invalid byte at offset 3."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LC_ALL="C.UTF-8")
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "encode", str(TINY), b"caf\xe9 au lait"],
                       capture_output=True, env=env, timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 2 and r.stdout == b""
    assert "the text argument: byte 3: not valid UTF-8" in err and err.count("\n") == 1
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "encode", str(TINY), "café au lait".encode()],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    # chat --option values alike: a Latin-1 date_string was written into the render as U+FFFD
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "chat", "-", "--format", "llama3.1", "--option",
                        b"date_string=\xe9t\xe9"], input=b'[{"role": "user", "content": "hi"}]',
                       capture_output=True, env=env, timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 2 and "--option: byte 12: not valid UTF-8" in err and err.count("\n") == 1, err


@needs_tiny
def test_text_output_is_utf8_under_an_ascii_locale():
    """Under a locale whose encoding is ASCII (``LC_ALL=C``, Python's UTF-8 mode and locale
    coercion off), ``decode`` and ``chat`` died writing ``é`` with a UnicodeEncodeError traceback,
    exit 1. The command writes UTF-8, as it reads. Worked example: ``café au lait`` encoded here
    decodes to its UTF-8 bytes and a newline; chatml of the user turn ``café`` is
    ``<|im_start|>user\\ncafé<|im_end|>\\n`` and a newline ending the output."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.stdout.encoding)"],
                           capture_output=True, text=True, env=env, timeout=60)
    if probe.stdout.strip().lower().replace("-", "") == "utf8":
        pytest.skip("this Python writes UTF-8 under LC_ALL=C")
    from rmlprep.load import open_tokenizer

    tok = open_tokenizer(str(TINY))[0]
    ids = tok.encode("café au lait")
    assert tok.decode(ids) == "café au lait"
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "decode", str(TINY), *map(str, ids)],
                       capture_output=True, env=env, timeout=120)
    assert (r.returncode, r.stdout) == (0, "café au lait\n".encode()), r.stderr
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "chat", "-", "--format", "chatml"], capture_output=True,
                       env=env, input='[{"role": "user", "content": "café"}]'.encode(), timeout=120)
    assert (r.returncode, r.stdout) == (0, "<|im_start|>user\ncafé<|im_end|>\n\n".encode()), r.stderr


@needs_tiny
def test_encode_argument_in_utf8_under_an_ascii_locale_is_its_text():
    """Under a locale whose file system encoding is not UTF-8 (``LC_ALL=C`` with Python's UTF-8
    mode and locale coercion off: ASCII), Python decodes every non-ASCII byte of argv as a lone
    surrogate, valid UTF-8 too: ``'café'`` arrives as ``'caf\\udcc3\\udca9'``. argv_text let
    that through as is (its bytes are UTF-8), and the tokenizer encoded two U+FFFD (``demo:gpt2``:
    ``66 1878 6353`` where ``café`` is ``66 1878 2634``), exit 0. The argument's bytes are decoded
    as UTF-8: the ids are those of the same argument under a UTF-8 locale."""
    base = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ascii_env = dict(base, LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                           capture_output=True, text=True, env=ascii_env, timeout=60)
    if probe.stdout.strip() == "utf-8":
        pytest.skip("this Python decodes argv as UTF-8 under LC_ALL=C")
    arg = "café au lait".encode()
    got = {}
    for name, env in (("utf8", dict(base, LC_ALL="C.UTF-8")), ("ascii", ascii_env)):
        for cmd in (["encode", str(TINY), arg], ["chat", "-", "--format", "llama3.1", "--option",
                                                  b"date_string=" + arg]):
            r = subprocess.run([sys.executable, "-m", "rmlprep.cli", *cmd], capture_output=True, env=env,
                               input=b'[{"role": "user", "content": "hi"}]', timeout=120)
            assert r.returncode == 0, r.stderr
            got[name, cmd[0]] = r.stdout
    assert b"caf" in got["utf8", "chat"] and got["utf8", "chat"].decode().count("café au lait") == 1
    assert got["ascii", "encode"] == got["utf8", "encode"] and got["ascii", "chat"] == got["utf8", "chat"]


@needs_tiny
def test_a_path_an_ascii_file_system_encoding_cannot_name_is_one_line(tmp_path):
    """Under a file system encoding that is not UTF-8 (``LC_ALL=C`` with Python's UTF-8 mode and
    locale coercion off: ASCII), ``output.dir = "out-é"`` died in ``os.listdir`` with a
    UnicodeEncodeError traceback, exit 1, and ``--output out-é`` (UTF-8 bytes) was refused as a
    name "not UTF-8" (review13). Each is now one line naming the key, the encoding and
    ``PYTHONUTF8=1``, exit 2; ``--output`` with an ASCII folder takes the place of the config's
    ``out-é`` before it is checked and the run writes its shards (exit 0)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                           capture_output=True, text=True, env=env, timeout=60)
    if probe.stdout.strip() == "utf-8":
        pytest.skip("this Python's file system encoding is UTF-8 under LC_ALL=C")
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    (tmp_path / "c.toml").write_bytes(
        f'[input]\npaths = ["a.jsonl"]\n[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 64\n'
        '[output]\ndir = "out-\u00e9"\n[run]\nprogress = "none"\nhistogram = false\n'.encode())

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", "c.toml", *extra], cwd=tmp_path,
                              capture_output=True, env=env, timeout=120)

    for extra, key in (((), "output.dir"), (("--output", "out-\u00fc".encode()), "--output")):
        r = run(*extra)
        err = r.stderr.decode()
        assert r.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{key}: " in err and "file system encoding is 'ascii'" in err and "PYTHONUTF8=1" in err, err
    r = run("--output", "out-plain")
    assert r.returncode == 0 and r.stdout.decode() == f"shards: {tmp_path / 'out-plain'}\n", r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["out-plain"]


@needs_tiny
def test_encode_decode_inspect(capsys):
    assert main(["encode", str(TINY), "Hello 123", "--json"]) == 0
    ids = json.loads(capsys.readouterr().out)
    assert ids and all(isinstance(i, int) for i in ids)
    assert main(["decode", str(TINY), *map(str, ids)]) == 0
    assert capsys.readouterr().out == "Hello 123\n"  # the output ends with a newline, as print's
    assert main(["decode", "-n", str(TINY), *map(str, ids)]) == 0
    assert capsys.readouterr().out == "Hello 123"  # the text exactly
    assert main(["inspect", str(TINY)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["vocab_size"] == 600 and len(info["fingerprint"]) == 64
    # options between the positionals (the README's form) give the same ids
    assert main(["encode", str(TINY), "--json", "Hello 123"]) == 0
    assert json.loads(capsys.readouterr().out) == ids
    assert main(["decode", str(TINY), "--skip-special-tokens", *map(str, ids)]) == 0
    assert capsys.readouterr().out == "Hello 123\n"
    with pytest.raises(SystemExit):
        main(["encode", str(TINY), "Hello", "--no-such-option"])


def test_encode_add_special_tokens_follows_each_files_reference_and_says_when_it_adds_nothing(capsys):
    """``--add-special-tokens`` adds what the file's reference library adds: a Llama 2 (or Mistral
    v0.1) ``tokenizer.model`` nothing, as sentencepiece's ``encode`` (add_bos off unless asked),
    the same model's Hugging Face tokenizer.json its BOS, as ``tokenizers``. The help said
    "add the tokenizer's bos/eos" and the .model added none without a word (a fresh-user
    trial); now the help names the .model case and a run that adds nothing says so on stderr."""
    spm = pytest.importorskip("sentencepiece")
    tokenizers = pytest.importorskip("tokenizers")
    real = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")
    text = "Hello world"
    for model, tj in ((real / "llama2" / "tokenizer.model", None),
                      (real / "mistral" / "tokenizer.model.v1", real / "hf" / "mistral-7b-v0.1")):
        if not model.is_file():
            pytest.skip(f"{model} not found")
        assert main(["encode", str(model), "--add-special-tokens", "--json", text]) == 0
        cap = capsys.readouterr()
        assert json.loads(cap.out) == spm.SentencePieceProcessor(model_file=str(model)).encode(text)
        assert cap.err.count("\n") == 1 and "--add-special-tokens added nothing" in cap.err
        if tj is not None:
            assert main(["encode", str(tj), "--add-special-tokens", "--json", text]) == 0
            cap = capsys.readouterr()
            want = tokenizers.Tokenizer.from_file(str(tj / "tokenizer.json")).encode(text).ids
            assert json.loads(cap.out) == want and want[0] == 1 and cap.err == ""
    gpt2 = real / "hf" / "gpt2"  # a tokenizer.json whose post_processor adds nothing (trial13): not "give the tokenizer.json"
    assert main(["encode", str(gpt2), "--add-special-tokens", "--json", text]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out) == tokenizers.Tokenizer.from_file(str(gpt2 / "tokenizer.json")).encode(text).ids
    assert cap.err == ("rmlprep: note: --add-special-tokens added nothing: this tokenizer file adds no bos/eos (its "
                       "post_processor adds none, as Hugging Face tokenizers' encode gives)\n")
    with pytest.raises(SystemExit):
        main(["encode", "--help"])
    assert "SentencePiece .model or a tiktoken file adds none" in " ".join(capsys.readouterr().out.split())


@needs_tiny
@pytest.mark.parametrize("args,bad", [(["abc"], "'abc'"), (["-n", "40", "abc"], "'abc'"), (["40", "1.5"], "'1.5'"),
                                      (["--skip-special-tokens", "x1"], "'x1'")])
def test_decode_names_a_bad_id_in_one_line(capsys, args, bad):
    """A word that is not an integer among the ids is one line naming it, exit 2 (it was argparse's
    "unrecognized arguments: 40 abc" after an option, or two lines of usage); ids separated by
    commas read as from stdin (``40,41`` is ``40 41``)."""
    assert main(["decode", str(TINY), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad} on the command line is not a token id" in err


@needs_tiny
def test_dash_is_stdin_and_a_jsonl_file_to_chat_is_named(tmp_path, capsys, monkeypatch):
    """Careless-user trial U7. ``encode TOK -`` encoded the text "-" (id 12 for GPT-2) where a
    Unix user means stdin, as cat and iconv take "-": it reads stdin now (decode too). ``chat``
    given a JSON Lines file said "not valid JSON: Extra data: line 2 column 1"; it names the file
    as JSON Lines and says what chat takes. ``decode -- -1`` was already one line naming the id."""
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"the the")))
    assert main(["encode", str(TINY), "-"]) == 0
    dash = capsys.readouterr().out
    assert main(["encode", str(TINY), "the the"]) == 0 and capsys.readouterr().out == dash != "12\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(dash))
    assert main(["decode", str(TINY), "-", "-n"]) == 0 and capsys.readouterr().out == "the the"
    conv = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (tmp_path / "c.jsonl").write_text(json.dumps(conv) + "\n" + json.dumps(conv) + "\n")
    assert main(["chat", str(tmp_path / "c.jsonl"), "--format", "chatml"]) == 2
    err = capsys.readouterr().err
    assert err == (f"rmlprep: error: {tmp_path / 'c.jsonl'}: holds 2 JSON lines (JSON Lines, one conversation each), "
                   "and chat writes one: a JSON list of messages or {\"messages\": [...]}; give one line (e.g. head -n 1 "
                   f"{tmp_path / 'c.jsonl'} > one.json), or run the sft pipeline over the file\n"), err
    assert main(["decode", str(TINY), "--", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "token id -1 is out of range" in err, err
    # chat's messages file too: "head -n 1 data.jsonl | rmlprep chat - ..." said "-: no such file"
    (tmp_path / "one.json").write_text(json.dumps(conv))
    assert main(["chat", str(tmp_path / "one.json"), "--format", "chatml"]) == 0
    rendered = capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(conv).encode() + b"\n")))
    assert main(["chat", "-", "--format", "chatml"]) == 0 and capsys.readouterr().out == rendered


@needs_tiny
@pytest.mark.parametrize("dash_last", [False, True], ids=["dash-first", "dash-last"])
def test_dash_reads_stdin_before_or_after_an_option(tmp_path, capsys, monkeypatch, dash_last):
    """Fresh-user trial: ``echo "Hello world" | rmlprep encode TOK --name gpt2 -`` (and decode's)
    exited 2 with "unrecognized arguments: -": argparse leaves a positional after an option over,
    and main() gave encode's and decode's leftovers back only when none began with "-". The "-"
    reads stdin wherever it stands; ``decode TOK -n -- -1`` is the one-line out-of-range refusal
    (it was "unrecognized arguments: --"), and an unknown option is still refused."""
    import io

    def run(*words: str, option: str, stdin: bytes) -> tuple[int, str]:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        argv = [*words, option, "-"] if dash_last else [*words, "-", option]
        return main(argv), capsys.readouterr().out

    assert main(["encode", str(TINY), "--json", "the the"]) == 0
    ids = capsys.readouterr().out
    assert run("encode", str(TINY), option="--json", stdin=b"the the") == (0, ids) and ids != "[12]\n"
    assert run("decode", str(TINY), option="-n", stdin=" ".join(map(str, json.loads(ids))).encode()) == (0, "the the")
    conv = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    (tmp_path / "one.json").write_text(json.dumps(conv))
    assert main(["chat", str(tmp_path / "one.json"), "--format", "chatml"]) == 0
    rendered = capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(conv).encode())))
    argv = ["chat", "--format", "chatml", "-"] if dash_last else ["chat", "-", "--format", "chatml"]
    assert main(argv) == 0 and capsys.readouterr().out == rendered
    assert main(["decode", str(TINY), "-n", "--", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "token id -1 is out of range" in err, err
    with pytest.raises(SystemExit) as e:
        main(["decode", str(TINY), "-n", "40", "--bogus"])
    assert e.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # the command's usage, which names its arguments (trial19: the top level's)
        main(["encode", "--tokenizer", str(TINY), "hi"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("usage: rmlprep encode ") and "tokenizer [text]" in err, err
    assert err.endswith("rmlprep encode: error: unrecognized arguments: --tokenizer\n"), err


def test_decode_reads_comma_separated_ids_as_the_references_decode_them(capsys):
    """``40,41`` on the command line is the ids 40 and 41 (it was checked only against
    rmlprep's own decoding of ``40 41``). Expected text: the real GPT-2's decoding of the same
    ids by ``tokenizers`` (its tokenizer.json) and by ``tiktoken`` (its rank file), for 40, 41
    ("IJ") and for the ids of a text with multi-byte characters cut across tokens."""
    tokenizers = pytest.importorskip("tokenizers")
    tiktoken = pytest.importorskip("tiktoken")
    from tools.make_parity_fixtures import real_dir

    folder, ranks = real_dir() / "hf" / "gpt2", real_dir() / "gpt2" / "gpt2.tiktoken"
    if not (folder / "tokenizer.json").is_file() or not ranks.is_file():
        pytest.skip(f"the real GPT-2 files are absent from {real_dir()}: run ../shared/real-tokenizers/get.sh")
    hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    from tiktoken.load import load_tiktoken_bpe

    tt = tiktoken.Encoding("gpt2", pat_str=_gpt2_pattern(), mergeable_ranks=load_tiktoken_bpe(str(ranks)),
                           special_tokens={"<|endoftext|>": 50256})
    for ids in ([40, 41], tt.encode("Grüße, 東京 — naïve café")):
        want = hf.decode(ids)
        assert want == tt.decode(ids)
        for path in (folder, ranks):
            assert main(["decode", "-n", str(path), ",".join(map(str, ids))]) == 0
            assert capsys.readouterr().out == want
    assert hf.decode([40, 41]) == "IJ"


def _gpt2_pattern() -> str:
    """tiktoken's GPT-2 pattern (``tiktoken_ext/openai_public.py``, r50k_base/gpt2)."""
    return r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@needs_tiny
def test_entry_exits_with_mains_status_and_freezes_the_collector(monkeypatch, capsys):
    """``entry`` (the console script, ``python -m rmlprep.cli``) exits with main's status and
    leaves every object in the collector's permanent generation, so interpreter shutdown does
    not walk them; ``main`` leaves the collector alone."""
    import gc

    from rmlprep.cli import entry

    before = gc.get_freeze_count()
    assert main(["encode", str(TINY), "Hello"]) == 0 and gc.get_freeze_count() == before
    for argv, status in ((["encode", str(TINY), "Hello"], 0), (["encode", str(TINY) + ".missing", "x"], 2)):
        monkeypatch.setattr(sys, "argv", ["rmlprep", *argv])
        try:
            with pytest.raises(SystemExit) as e:
                entry()
            assert e.value.code == status and gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()
    capsys.readouterr()


@needs_tiny
def test_chat_and_parity_commands(tmp_path, capsys):
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]))
    assert main(["chat", str(m), "--format", "chatml", "--no-newline"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    assert main(["chat", str(m), "--format", "llama3"]) == 0  # its text ends in <|eot_id|>: a newline follows
    assert capsys.readouterr().out.endswith("<|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>\n")
    # the tiny vocabulary has no <|im_end|>: encoding ChatML with it is refused, as by a run
    # (test_chat_pipeline.py), unless --text-markers; its <|eot_id|> is a special token
    assert main(["chat", str(m), "--format", "chatml", "--tokenizer", str(TINY)]) == 2
    err = capsys.readouterr().err
    assert "'<|im_end|>', which is not a special token of this tokenizer" in err and "--text-markers" in err
    assert main(["chat", str(m), "--format", "chatml", "--tokenizer", str(TINY), "--text-markers"]) == 0
    enc = json.loads(capsys.readouterr().out)
    assert len(enc["input_ids"]) == len(enc["assistant_masks"])
    assert main(["chat", str(m), "--format", "llama3", "--tokenizer", str(TINY)]) == 0
    capsys.readouterr()
    assert main(["chat", str(m), "--format", "no-such-format"]) == 2
    capsys.readouterr()
    # a message holding a key twice is refused (json.loads kept the last: the user's text read as an answer)
    d = tmp_path / "dup.json"
    d.write_text('[{"role": "user", "content": "q", "role": "assistant"}, {"role": "assistant", "content": "a"}]')
    assert main(["chat", str(d), "--format", "chatml"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{d}: a JSON object holds the key 'role' twice (the object at "
                                                    "$[0]): which value is meant is not knowable")
    # a UTF-8 byte-order mark at byte 0 is skipped, as the JSONL reader does (_hostile_jsonl
    # below): the same text follows; it was refused as "Unexpected UTF-8 BOM" (explorer n6). A
    # UTF-16 file is refused by name, bytes that are not UTF-8 with their offset.
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + m.read_bytes())
    assert main(["chat", str(bom), "--format", "chatml", "--no-newline"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    bom.write_bytes(b"\xff\xfe" + m.read_text().encode("utf-16-le"))
    assert main(["chat", str(bom), "--format", "chatml"]) == 2
    assert "the file is UTF-16-LE (byte-order mark at byte 0)" in capsys.readouterr().err
    bom.write_bytes(b'\xef\xbb\xbf[{"role": "user", "content": "\xe9"}]')
    assert main(["chat", str(bom), "--format", "chatml"]) == 2
    assert "byte 33: not valid UTF-8" in capsys.readouterr().err
    assert main(["parity", str(TINY)]) == 0
    assert "cases match" in capsys.readouterr().out
    assert main(["encode", str(tmp_path / "missing.json"), "x"]) == 2


@pytest.mark.parametrize("argv, near", [
    pytest.param(["chat", "M", "--format", "qwen25"], "; did you mean 'qwen2.5'?", id="chat-misspelt"),
    # every format whose name starts with the user's: 'mistral-v7' alone was offered
    pytest.param(["chat", "M", "--format", "mistral"],
                 "; did you mean one of 'mistral-v1', 'mistral-v3', 'mistral-v3-tekken', 'mistral-v7', "
                 "'mistral-v7-tekken', 'mistral-small-3.2'?", id="chat-prefix"),
    pytest.param(["chat", "M", "--format", "Llama3", "--tokenizer", "never-loaded"], "; did you mean 'llama3'?",
                 id="chat-case"),
    pytest.param(["parity", "--chat", "llama"], "; did you mean one of 'llama2', 'llama3', 'llama3.1', 'llama3.2'?",
                 id="parity-prefix"),
])
def test_unknown_chat_format_names_what_else_it_takes(tmp_path, capsys, argv, near):
    """``chat --format qwen25`` ended its list of formats with '(or pass a model's Jinja chat
    template)' and no near name, while a run's ``chat.format`` names "auto", "template" and the
    near names (``chat.registry.config_format_error``). The command now says what its option
    takes besides the names (``chat``: "auto" and "template" with --tokenizer, or a template
    file; ``parity --chat``: a template file), then the near names: every format whose name
    starts with the one given (the six mistral formats for "mistral"), else the closest spelling,
    case ignored. The name is refused before any tokenizer is loaded."""
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    argv = [str(m) if x == "M" else x for x in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    others = ('; or "auto" (with --tokenizer: the format that reproduces its chat template), "template" '
              '(that template itself, rendered with jinja2) or a Jinja template file'
              if argv[0] == "chat" else "; or a Jinja template file")
    assert err.count("\n") == 1 and "known: chatml, " in err and "pass a model's Jinja" not in err, err
    assert err.rstrip("\n").endswith(f"command-r{others}{near}"), err


def test_chat_format_file_that_is_not_there_is_named(tmp_path, capsys):
    """A ``--format`` value that is a template file's name (a ``/``, a ``.jinja`` suffix) but no
    file: said so, not listed as an unknown format name."""
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert main(["chat", str(m), "--format", "tmpl.jinja"]) == 2
    assert capsys.readouterr().err == ("rmlprep: error: chat --format tmpl.jinja: no such file (a Jinja template "
                                       "file), nor a format name\n")


@needs_tiny
def test_stdin_and_files_read_a_utf8_byte_order_mark_alike(tmp_path, monkeypatch, capsys):
    """One decoder for stdin, a messages file and a template file: a UTF-8 byte-order mark at
    byte 0 is skipped, as the JSONL and CSV readers skip it. ``rmlprep encode`` kept it (the
    ids of U+FEFF before the text) while ``rmlprep chat`` skipped it on the messages file and
    kept it on a ``--format`` template file, whose render then started with U+FEFF and matched
    no format. Offsets of invalid bytes count the mark: b"\xef\xbb\xbfcaf\xe9" fails at byte 6."""
    import io

    def stdin(data: bytes):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    stdin("Hello 123".encode())
    assert main(["encode", str(TINY), "--json"]) == 0
    stdin(b"\xef\xbb\xbf" + "Hello 123".encode())
    assert main(["encode", str(TINY), "--json"]) == 0
    plain, marked = capsys.readouterr().out.splitlines()
    assert marked == plain
    stdin(b"\xef\xbb\xbfcaf\xe9")
    assert main(["encode", str(TINY)]) == 2
    assert "stdin: byte 6: not valid UTF-8" in capsys.readouterr().err
    # ../shared/chat-templates/chatml-openhermes.jinja, byte for byte
    template = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                "{% endif %}").encode()
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]))
    t = tmp_path / "t.jinja"
    t.write_bytes(template)
    assert main(["chat", str(m), "--format", str(t), "--no-newline"]) == 0
    want = capsys.readouterr().out
    assert want == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    t.write_bytes(b"\xef\xbb\xbf" + template)
    assert main(["chat", str(m), "--format", str(t), "--no-newline"]) == 0
    assert capsys.readouterr().out == want
    t.write_bytes(b"\xff\xfe" + template.decode().encode("utf-16-le"))
    assert main(["chat", str(m), "--format", str(t)]) == 2
    assert f"{t}: the file is UTF-16-LE (byte-order mark at byte 0)" in capsys.readouterr().err


@needs_tiny
def test_parity_texts_file_errors_are_one_line(tmp_path, capsys):
    """``parity --texts FILE``: a line that is not JSON, or an object without "text", was a
    traceback (exit 1); now one line naming the file and the line, exit 2. The file is read as
    every other (a UTF-8 byte-order mark skipped)."""
    from rmlprep.cli_text import read_texts

    f = tmp_path / "t.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"text": "a"}\n\n"b"\n \t\r\n{"text": "c"}\n')
    assert read_texts(str(f)) == ["a", "b", "c"]
    for body, why in ((b'{"text": "a"}\n{"text": "b"\n', "line 2: not valid JSON"),
                      (b'{"txt": "a"}\n', 'line 1: an object without a "text" string'),
                      # a blank line is JSON whitespace only, as the JSONL reader's: a line of form
                      # feeds or vertical tabs (skipped by str.strip before) is a line that is not JSON
                      (b'{"text": "a"}\n\x0c\x0c\n', "line 2: not valid JSON (only whitespace JSON does not allow"),
                      (b" \t\r\n\x0b\n", "line 2: not valid JSON (only whitespace JSON does not allow"),
                      # json.loads kept the last "text": which one is meant is unknowable
                      (b'{"text": "a", "text": "b"}\n', "line 1: a JSON object holds the key 'text' twice")):
        f.write_bytes(body)
        assert main(["parity", str(TINY), "--texts", str(f)]) == 2
        err = capsys.readouterr().err
        assert f"{f}: {why}" in err and err.count("\n") == 1


CHAT_RENDERS = ROOT / "fixtures" / "chat" / "renders.jsonl.gz"
needs_renders = pytest.mark.skipif(not CHAT_RENDERS.exists(), reason=f"{CHAT_RENDERS} is absent")


def _doctored_renders(tmp_path: Path) -> Path:
    import gzip

    recs = [json.loads(x) for x in gzip.decompress(CHAT_RENDERS.read_bytes()).decode("utf-8").splitlines()]
    row = next(r for r in recs if r.get("template") == "chatml-openhermes" and "output" in r and "Hello" in r["output"])
    row["output"] = row["output"].replace("Hello", "Hallo", 1)
    p = tmp_path / "renders.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return p


def test_chat_options(tmp_path, capsys):
    """--option KEY=VALUE passes chat options as chat.options does in a run: Qwen3's non-thinking
    generation prompt (the template's ``enable_thinking is false`` branch writes an empty think
    block), gpt-oss's reasoning effort and date; a quoted "false" is a string and refused."""
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert main(["chat", str(m), "--format", "qwen3", "--add-generation-prompt", "-n"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert main(["chat", str(m), "--format", "qwen3", "--add-generation-prompt", "-n",
                 "--option", "enable_thinking=false"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert main(["chat", str(m), "--format", "gpt-oss", "--option", "reasoning_effort=high",
                 "--option", "today=2025-03-01"]) == 0
    out = capsys.readouterr().out
    assert "Current date: 2025-03-01\n\nReasoning: high\n" in out
    assert main(["chat", str(m), "--format", "qwen3", "--option", 'enable_thinking="false"']) == 2
    assert "option enable_thinking must be true or false, got 'false'" in capsys.readouterr().err
    assert main(["chat", str(m), "--format", "qwen3", "--option", "enable_thinking"]) == 2
    assert "give KEY=VALUE" in capsys.readouterr().err
    # a TOML datetime is no date: refused in one line (its isoformat failed later with a traceback, exit 1)
    assert main(["chat", str(m), "--format", "gpt-oss", "--option", "today=2025-03-01T10:00:00"]) == 2
    assert "option today must be a date 'YYYY-MM-DD', got datetime.datetime(2025, 3, 1, 10, 0)" in capsys.readouterr().err


def test_chat_refuses_a_file_key_it_would_not_read(tmp_path, capsys):
    """Explorer8 E2: ``rmlprep chat`` read only ``messages`` and ``tools`` of a file, so a
    LLaMA-Factory row's ``system`` printed Qwen's default system prompt in its place, a
    ``functions`` list printed the calls with no definitions and an ``images`` list printed the
    ``<image>`` placeholder as text, all exit 0, where a run refuses each column by name. The
    file is now refused naming the key (exit 2); ``null`` is no value, as in a run."""
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    m = tmp_path / "m.json"
    for key, value in (("system", "Be terse."), ("system_prompt", "Be terse."), ("functions", []),
                       ("images", ["a.png"])):
        m.write_text(json.dumps({"messages": conv, key: value}))
        assert main(["chat", str(m), "--format", "qwen2.5"]) == 2
        assert f"'{key}'" in capsys.readouterr().err
    m.write_text(json.dumps({"messages": conv, "system": None, "id": 7}))
    assert main(["chat", str(m), "--format", "qwen2.5", "-n"]) == 0
    assert capsys.readouterr().out.endswith("<|im_start|>assistant\nhello<|im_end|>\n")


def test_chat_refuses_text_parts_unless_join_text_parts_chooses(tmp_path, capsys):
    """``rmlprep chat`` joined two text parts with "" silently where a run refuses them for a format
    whose template takes a string (f8934f5: chat.join_text_parts). Now exit 2 with the run's reason
    in one line, naming --join-text-parts; with it (``\\n`` typed as backslash n), the parts joined
    so: worked example, ChatML's ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message with
    content "hi " + "\\n" + "there". gemma3's template iterates parts: written as before."""
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": [{"type": "text", "text": "hi "},
                                                          {"type": "text", "text": "there"}]},
                             {"role": "assistant", "content": "yo"}]))
    assert main(["chat", str(m), "--format", "chatml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rmlprep: error: message 0 (user): its content is 2 text parts, "
                                                   "which chatml's template does not join"), err
    assert "pass --join-text-parts '\\n' (a newline: vLLM's join) or --join-text-parts ''" in err, err
    assert main(["chat", str(m), "--format", "chatml", "--join-text-parts", "\\n", "-n"]) == 0
    assert capsys.readouterr().out == "<|im_start|>user\nhi \nthere<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    assert main(["chat", str(m), "--format", "chatml", "--join-text-parts", "", "-n"]) == 0
    assert capsys.readouterr().out.startswith("<|im_start|>user\nhi there<|im_end|>\n")
    assert main(["chat", str(m), "--format", "gemma3", "-n"]) == 0
    assert "<start_of_turn>user\nhithere<end_of_turn>" in capsys.readouterr().out  # each part stripped, as its template
    real = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", "~/.cache/rmlprep-real-tokenizers")).expanduser() / "hf"
    if (real / "qwen2.5").is_dir():  # encoding: refused alike; a join is not for the template itself
        assert main(["chat", str(m), "--format", "qwen2.5", "--tokenizer", str(real / "qwen2.5")]) == 2
        assert "which qwen2.5's template does not join" in capsys.readouterr().err
        assert main(["chat", str(m), "--format", "template", "--tokenizer", str(real / "qwen2.5"),
                     "--join-text-parts", ""]) == 2
        assert "join_text_parts is for the native formats" in capsys.readouterr().err


def test_chat_auto_and_template_take_the_tokenizers_template(tmp_path, capsys):
    """--format auto / template with --tokenizer take the tokenizer's own chat template, as
    chat.format does in a run (both were refused as unknown format names); without --tokenizer,
    or with a tokenizer that has no template, they say what to give. Worked example, read off
    Qwen3's template with enable_thinking false: the render below, "yo<|im_end|>" trained."""
    real = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", "~/.cache/rmlprep-real-tokenizers")).expanduser() / "hf"
    if not (real / "qwen3").is_dir() or not (real / "gpt2").is_dir():
        pytest.skip(f"{real} is absent (bash ../shared/real-tokenizers/get.sh)")
    tokenizers = pytest.importorskip("tokenizers")
    pytest.importorskip("jinja2")
    m = tmp_path / "m.json"
    m.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]))
    assert main(["chat", str(m), "--format", "auto"]) == 2
    assert "chat --format auto: give --tokenizer" in capsys.readouterr().err
    assert main(["chat", str(m), "--format", "template", "--tokenizer", str(real / "gpt2")]) == 2
    assert "carries no chat_template" in capsys.readouterr().err
    text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nyo<|im_end|>\n"
    ref = tokenizers.Tokenizer.from_file(str(real / "qwen3" / "tokenizer.json")).encode(text, add_special_tokens=False)
    k = ref.tokens.index("yo")
    for fmt, named in (("qwen3", "qwen3"), ("auto", "qwen3"), ("template", "template")):
        assert main(["chat", str(m), "--format", fmt, "--tokenizer", str(real / "qwen3"),
                     "--option", "enable_thinking=false"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["format"] == named and out["input_ids"] == ref.ids
        assert out["assistant_masks"] == [int(i in (k, k + 1)) for i in range(len(ref.ids))]
    if (real / "llama3").is_dir():  # Meta's first Llama 3 template, no format reproduces: the refusal says what to
        # pass; a parity failure (exit 3) as chat.format = "auto" in a run and parity --chat FILE (README, exit codes)
        assert main(["chat", str(m), "--format", "auto", "--tokenizer", str(real / "llama3")]) == 3
        err = capsys.readouterr().err
        assert err.startswith("rmlprep: parity failure, stopped before any corpus work: chat parity: chat --format "
                              "auto: no rmlprep chat format reproduces this template"), err
        assert err.rstrip().endswith("in this call: pass --format llama3 to write that format's text (it differs from "
                                     "the template as shown), or --format template to render the template itself "
                                     "with jinja2"), err


@needs_renders
def test_parity_chat_alone(tmp_path, capsys):
    assert main(["parity", "--chat", "chatml"]) == 0
    assert "renders of chatml-openhermes match format 'chatml'" in capsys.readouterr().out
    assert main(["parity", "--chat", "mistral-v3"]) == 0
    assert main(["parity", "--chat", "nope"]) == 2
    assert main(["parity"]) == 2
    assert main(["parity", "--chat-renders", str(CHAT_RENDERS), str(TINY)]) == 2
    r = cli("parity", "--chat", "chatml", "--chat-renders", str(_doctored_renders(tmp_path)))
    assert r.returncode == 3, r.stderr
    assert "chat text differs" in r.stderr and "reference continues: 'allo, how" in r.stderr and "Traceback" not in r.stderr
    if importlib.util.find_spec("jinja2") is not None:  # a template no format reproduces: a parity failure, as in a run
        t = tmp_path / "sep.jinja"  # ChatML with <|im_sep|> after the role: 'chatml' differs at character 16
        t.write_text("{% for m in messages %}{{'<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + "
                     "'<|im_end|>\\n'}}{% endfor %}")
        assert main(["parity", "--chat", str(t)]) == 3
        assert "chat parity: no rmlprep chat format reproduces this template" in capsys.readouterr().err
        m = tmp_path / "m.json"  # the chat preview of that template file: the same failure, the same exit
        m.write_text(json.dumps([{"role": "user", "content": "hi"}]))
        assert main(["chat", str(m), "--format", str(t)]) == 3
        assert "chat parity: no rmlprep chat format reproduces this template" in capsys.readouterr().err


@needs_renders
@needs_tiny
def test_sft_run_doctored_chat_render_exit_3(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                                               {"role": "assistant", "content": "yo"}]}) + "\n")
    renders = _doctored_renders(tmp_path)
    c = tmp_path / "c.toml"
    c.write_text(f'pipeline="sft"\n[input]\npaths=["d.jsonl"]\n[tokenizer]\npath="{TINY}"\n'
                 f'[parity]\nchat_renders="{renders.name}"\n[chat]\nformat="chatml"\ntext_markers=true\n'
                 '[pack]\nseq_len=64\n[output]\ndir="out"\n')
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "parity failure" in r.stderr and "chatml-openhermes" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "train-00000.parquet").exists()
    c.write_text(c.read_text().replace(f'chat_renders="{renders.name}"', "chat = false"))
    r = cli("run", "c.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "train-00000.parquet").exists()


# -- rmlprep run never exits 1 ---------------------------------------------------------------------
def _good_rows(n: int) -> bytes:
    return b"".join(json.dumps({"text": f"Document {i}: some words, {i * 7} and more."}).encode() + b"\n"
                    for i in range(n))


def _hostile_jsonl() -> tuple[bytes, int]:
    """Rows a scraper or an exporter really writes: lone surrogates, 100,000-deep nesting, a
    5,000-digit integer, broken JSON, not UTF-8, not an object, a null, a BOM at byte 0.
    Returns the bytes and the number of non-blank rows (each one must be a document or a reject)."""
    rows = [b"\xef\xbb\xbf" + json.dumps({"text": "BOM first"}).encode(),
            rb'{"text": "lone \ud800 surrogate"}', rb'{"text": "\udfff"}', b"[" * 100_000,
            b'{"text": "big", "n": ' + b"9" * 5000 + b"}", b'{"text": "cut', b'{"text": "\xff\xfe not utf-8"}',
            b"[1, 2]", b'{"text": null}', b'{"text": {"nested": true}}', b"", b"   ", b'{"text": "last"}']
    return b"\n".join(rows) + b"\n", sum(1 for r in rows if r.strip())


def _hostile_files(d: Path) -> dict[str, tuple[str, int | None]]:
    """name → (expected kind: "rows" (exit 0, every row accounted), "rejected" (every row a reject,
    accounted, exit 2) or "file" (exit 2)), rows in."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    cases: dict[str, tuple[str, int | None]] = {}
    body = _good_rows(200)
    (d / "good.jsonl").write_bytes(body)
    cases["good.jsonl"] = ("rows", 200)
    data, n = _hostile_jsonl()
    (d / "hostile.jsonl").write_bytes(data)
    cases["hostile.jsonl"] = ("rows", n)
    (d / "hostile.jsonl.gz").write_bytes(gzip.compress(data))
    cases["hostile.jsonl.gz"] = ("rows", n)
    (d / "only-bad.jsonl").write_bytes(b'{"text": null}\n\n{"text": 1}\n')
    cases["only-bad.jsonl"] = ("rejected", 2)  # every row a reject: accounted, and exit 2 (nothing to train on)
    zst = zstandard.ZstdCompressor().compress(body)
    (d / "half.jsonl.zst").write_bytes(zst[: len(zst) // 2])
    cases["half.jsonl.zst"] = ("file", None)
    (d / "tenth.jsonl.zst").write_bytes(zst[: len(zst) // 10])
    cases["tenth.jsonl.zst"] = ("file", None)
    gz = gzip.compress(body)
    (d / "cut.jsonl.gz").write_bytes(gz[: len(gz) * 2 // 3])
    cases["cut.jsonl.gz"] = ("file", None)
    import bz2
    import lzma

    for name, packed in (("cut.jsonl.bz2", bz2.compress(body)), ("cut.jsonl.xz", lzma.compress(body))):
        (d / name).write_bytes(packed[: len(packed) * 2 // 3])  # a cut download, found when decoded
        cases[name] = ("file", None)
    (d / "random.jsonl.zst").write_bytes(zst[:20] + os.urandom(2000))
    cases["random.jsonl.zst"] = ("file", None)
    (d / "garbage.parquet").write_bytes(b"PAR1" + os.urandom(3000) + b"PAR1")
    cases["garbage.parquet"] = ("file", None)
    pq.write_table(pa.table({"content": ["x"] * 5}), d / "no-column.parquet")
    cases["no-column.parquet"] = ("file", None)
    (d / "quote.csv").write_text('id,text\n1,good\n2,"unterminated\n3,good\n')  # the issue's file
    cases["quote.csv"] = ("file", None)
    (d / "rows.csv").write_text('text,n\n"one",1\n"two",2,extra\n"three",3\n')
    cases["rows.csv"] = ("rows", 3)
    (d / "array.jsonl").write_text('[{"text": "a JSON array, not JSON Lines"}]\n')
    cases["array.jsonl"] = ("file", None)
    (d / "cutline.jsonl").write_bytes(body[:-7])  # a copy that stopped mid-line
    cases["cutline.jsonl"] = ("file", None)
    (d / "mac.jsonl").write_bytes(body.replace(b"\n", b"\r"))  # lone-CR line endings: one line
    cases["mac.jsonl"] = ("file", None)
    hf = d / "hf"
    hf.mkdir()
    (hf / "state.json").write_text("{not json")
    cases["hf"] = ("file", None)
    return cases


def _run_cli(capsys, toml: Path) -> tuple[int, str]:
    rc = main(["run", str(toml)])
    return rc, capsys.readouterr().err


def _toml(path: Path, inputs: list[str], out: Path, *, rejects_ok: bool = False) -> Path:
    """A config of the tiny tokenizer; ``rejects_ok``: run.max_reject_fraction = 1 (inputs of
    mostly bad rows on purpose, whose exit 0 is the point)."""
    path.write_text(f"[input]\npaths = {json.dumps(inputs)}\nunit_bytes = 2000\n[tokenizer]\npath = \"{TINY}\"\n"
                    f"[pack]\nseq_len = 64\n[output]\ndir = \"{out}\"\n"
                    "[run]\nworkers = 1\nprogress = \"none\"\nhistogram = false\n"
                    + ("max_reject_fraction = 1\n" if rejects_ok else ""))
    return path


def _check_accounting(out: Path, rows_in: dict[str, int]) -> None:
    """For exit 0: for every file, rows in = documents in its shards + its rejects (manifest), and
    the shards really hold the manifest's documents."""
    import pyarrow.parquet as pq

    from rmlprep.packing import unpack

    m = json.loads((out / "manifest.json").read_text())
    per_file: dict[str, int] = {}
    for s in m["shards"]:
        name = Path(s["source"].split(" ")[0]).name
        per_file[name] = per_file.get(name, 0) + s["documents"] + s["rejects"]
        assert len(unpack(pq.read_table(out / s["shard"]))) == s["documents"]
    assert per_file == rows_in


@needs_tiny
def test_run_over_hostile_inputs_never_exits_1(tmp_path, capsys):
    """Each hostile input alone, then all row-level ones together, then everything at once: exit
    0 with every row accounted for, or exit 2 with one line naming the file and no manifest;
    never 1. A compressed file cut short (.gz, .zst, .bz2, .xz) is such a file on a fresh run
    too: zstd's frames are walked while the run is planned, the others fail when decoded."""
    d = tmp_path / "in"
    d.mkdir()
    cases = _hostile_files(d)
    for i, (name, (kind, n)) in enumerate(sorted(cases.items())):
        out = tmp_path / f"o{i}"
        rc, err = _run_cli(capsys, _toml(tmp_path / f"c{i}.toml", [str(d / name)], out, rejects_ok=True))
        assert rc == (0 if kind == "rows" else 2), (name, err)
        if kind != "file":
            _check_accounting(out, {name: n})
        if rc != 0:
            errors = [x for x in err.splitlines() if x.startswith("rmlprep:")]
            assert len(errors) == 1 and name in errors[0] and "Traceback" not in err, (name, err)
        if kind == "file":  # a fresh run: no manifest says the folder is complete
            assert not (out / "manifest.json").exists(), name
    rows = {k: n for k, (kind, n) in cases.items() if kind != "file"}
    out = tmp_path / "rows"
    rc, err = _run_cli(capsys, _toml(tmp_path / "rows.toml", [str(d / k) for k in sorted(rows)], out, rejects_ok=True))
    assert rc == 0, err
    _check_accounting(out, rows)
    rc, err = _run_cli(capsys, _toml(tmp_path / "all.toml", [str(d / "*")], tmp_path / "all"))
    assert rc == 2 and err.count("rmlprep: error") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "all" / "manifest.json").exists()


@needs_tiny
def test_a_run_whose_every_row_is_rejected_exits_2(tmp_path, capsys, monkeypatch):
    """Chat rows given to the pretrain pipeline (no "text" field): each of the 3 rows is a reject
    and no document reaches the shards. An empty dataset is no success: exit 2, one line naming
    the count and the first reject (d.jsonl, row 0, its reason); the rejects stay in rejects/.
    The live parity check, with no document to encode, says so, not "0 corpus documents match"
    (which read like a failure to a fresh-user trial)."""
    rows = [{"messages": [{"role": "user", "content": f"hi {i}"}]} for i in range(3)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o"
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "d.jsonl")], out)
    toml.write_text(toml.read_text() + "[parity]\nlive_sample = 8\n")
    from rmlprep import parity  # no reference reads the tiny fixture: a live check that counts what it gets
    monkeypatch.setattr(parity, "live_check", lambda tok, path, texts, **kw: (len(texts), "tokenizers"))
    rc, err = _run_cli(capsys, toml)
    errors = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "every row was rejected (3 rows" in errors[0] and "d.jsonl row 0: " in errors[0], errors[0]
    assert "text" in errors[0].split("row 0: ")[1], errors[0]  # the reason names the missing field
    assert "0 corpus documents match" not in err and "had no corpus document to encode" in err, err
    rejected = [json.loads(x) for f in sorted((out / "rejects").glob("*.jsonl")) for x in f.read_text().splitlines()]
    assert [r["row"] for r in rejected] == [0, 1, 2]


@needs_tiny
def test_every_row_rejected_leaves_no_dataset_card_and_the_fixed_rerun_needs_no_overwrite(tmp_path, capsys):
    """A wrong input.column: every row is a reject. The folder's README.md says there is no data
    (before: a dataset card with loading lines) and the command prints no "shards:" line. The
    rerun with the column fixed changes the config, yet needs no --overwrite (before: refused):
    the units it replaces hold no document."""
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"body": f"text number {i} " * 9}) + "\n" for i in range(40)))
    out = tmp_path / "o"
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "d.jsonl")], out)
    toml.write_text(toml.read_text().replace("[input]\n", "[input]\ncolumn = \"text\"\n"))
    rc = main(["run", str(toml)])
    cap = capsys.readouterr()
    assert rc == 2 and "shards:" not in cap.out and "every row was rejected (40 rows" in cap.err
    readme = (out / "README.md").read_text()
    assert readme.startswith("# No data") and "every one of its 40 input rows was rejected" in readme
    assert "load_dataset" not in readme and "configs:" not in readme
    toml.write_text(toml.read_text().replace('column = "text"', 'column = "body"'))
    rc = main(["run", str(toml)])
    cap = capsys.readouterr()
    assert rc == 0 and cap.out.strip() == f"shards: {out}", cap.err
    assert re.search(r"output: \d+ units of another config or tokenizer hold no document", cap.err), cap.err
    m = json.loads((out / "manifest.json").read_text())
    assert m["totals"]["documents"] == 40 and m["totals"]["rejects"] == 0 and not list(out.glob("rejects/*"))
    assert "load_dataset" in (out / "README.md").read_text()


@needs_tiny
@pytest.mark.parametrize("body", [b"", b"\n\n  \n"], ids=["empty", "blank-lines"])
def test_a_run_over_no_rows_exits_2(tmp_path, capsys, body):
    """An input file with no rows (empty, or blank lines only, which are not rows) gives an
    empty dataset: one line, exit 2, as for a run whose every row is rejected."""
    (tmp_path / "d.jsonl").write_bytes(body)
    rc, err = _run_cli(capsys, _toml(tmp_path / "c.toml", [str(tmp_path / "d.jsonl")], tmp_path / "o"))
    errors = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "the input holds no rows (1 unit read" in errors[0], errors[0]


@needs_tiny
def test_a_run_over_max_reject_fraction_exits_2_with_the_rejects_by_stage(tmp_path, capsys):
    """Careless-user trial: a run whose 90 of 100 rows were rejects exited 0, its summary saying
    only "rejects 90". Rows (worked out from the loop below): every 10th row is good (10); of
    the others, i % 3 == 0 is not JSON and i % 3 == 1 has no "text" field (read: 30 + 30), i %
    3 == 2 has a number for text (validate: 30). Over run.max_reject_fraction (0.1 by default)
    the run writes its folder as usual and exits 2 with one line: the count, the share, the
    stages, the first reject and the flag that accepts them; the summary and the manifest give
    the stages too. The rerun with --max-reject-fraction 0.9 finds every unit done and exits 0;
    1 never fails; 11 rejects of 110 rows (10%) pass the default."""
    lines = []
    for i in range(100):
        lines.append(json.dumps({"text": f"good row {i}"}) if i % 10 == 0 else
                     "{not json" if i % 3 == 0 else json.dumps({"txt": "x"}) if i % 3 == 1 else json.dumps({"text": 5}))
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "o"
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "d.jsonl")], out)
    rc, err = _run_cli(capsys, toml)
    errors = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert errors[0] == (
        "rmlprep: error: 90 of 100 rows were rejected (90.0% of rows read: read 60, validate 30), more than "
        f"run.max_reject_fraction = 0.1; the first: {tmp_path / 'd.jsonl'} row 1: no 'text' field (fields: ['txt']); "
        f"every row's reason is in {out / 'rejects'}/ (the shards and manifest are written: if these rejects are "
        "expected, rerun with --max-reject-fraction 0.9 or set run.max_reject_fraction)")
    assert f"rejects      90 (90.0% of rows read: read 60, validate 30; see {out / 'rejects'}/)" in err
    m = json.loads((out / "manifest.json").read_text())
    assert m["rejects"]["by_stage"] == {"read": 60, "validate": 30} and m["totals"]["documents"] == 10
    assert json.loads((out / "shard-00000.done.json").read_text())["rejects_by_stage"] == {"read": 60, "validate": 30}
    rc = main(["run", str(toml), "--max-reject-fraction", "0.9"])
    cap = capsys.readouterr()
    assert rc == 0 and cap.out == f"shards: {out}\n" and "rmlprep: error" not in cap.err, cap.err
    marker = out / "shard-00000.done.json"  # a kept marker of an rmlprep before the count: not known
    marker.write_text(json.dumps({k: v for k, v in json.loads(marker.read_text()).items() if k != "rejects_by_stage"}))
    toml.write_text(toml.read_text() + "max_reject_fraction = 1\n")
    rc, err = _run_cli(capsys, toml)
    assert rc == 0 and "rejects      90 (90.0% of rows read: stages not known; see" in err, err
    assert json.loads((out / "manifest.json").read_text())["rejects"]["by_stage"] is None
    assert main(["run", str(toml), "--max-reject-fraction", "1.5"]) == 2
    assert "rmlprep: error: --max-reject-fraction: must be a number from 0 to 1" in capsys.readouterr().err
    (tmp_path / "e.jsonl").write_text("".join(json.dumps({"text": f"t {i}"}) + "\n" for i in range(99)) + "{bad\n" * 11)
    rc, err = _run_cli(capsys, _toml(tmp_path / "e.toml", [str(tmp_path / "e.jsonl")], tmp_path / "e"))
    assert rc == 0 and "rejects      11 (10.0% of rows read: read 11; see" in err, err


@pytest.mark.parametrize("rejects,rows,flag", [(100_049, 1_000_000, "0.11"), (66_001, 100_000, "0.67"),
                                               (66, 100, "0.66"), (1, 3, "0.34")])
def test_the_fraction_the_reject_line_suggests_accepts_the_rejects(tmp_path, rejects, rows, flag):
    """The line over run.max_reject_fraction ends "rerun with --max-reject-fraction F": F is the
    share rounded *up* to 2 decimals, and a run with F passes (the verdict fails a share over
    it). 100,049 rejects of 1,000,000 rows (10.0049%) suggested 0.1, the default the run had
    just failed at; 66,001 of 100,000 suggested 0.66. Exact shares (66 of 100) stay as they are."""
    from rmlprep.pipeline.verdict import run_verdict

    class Cfg(dict):
        output_dir = tmp_path

    manifest = {"totals": {"rejects": rejects, "rows_read": rows, "documents": rows - rejects},
                "rejects": {"by_stage": {"read": rejects}, "files": []}, "shards": [{}],
                "config": {"output": {"dir": str(tmp_path)}}}
    why = run_verdict(Cfg(run={"max_reject_fraction": 0.1}), manifest)
    assert why is not None and f"rerun with --max-reject-fraction {flag} or set" in why, why
    assert run_verdict(Cfg(run={"max_reject_fraction": float(flag)}), manifest) is None


def test_a_file_s_documents_dropped_as_configured_do_not_count_toward_its_share(tmp_path):
    """A file's share of rejects counts its bad rows, not the documents pack.overflow = "drop"
    left out (as the run's verdict counts them): b.jsonl, 100 rows read in two units, 50 rejects
    of which 45 dropped, has 5 bad rows (5% <= 0.1): no warning; with 15 bad rows (60 rejects,
    45 dropped: 15%) it is named, its counts 15 of 100 rows; a.jsonl (no reject) never."""
    from rmlprep.pipeline.verdict import reject_share_warning

    def manifest(b_rejects):
        shard = {"documents": 40, "rejects": 0, "rows_read": 40, "dropped_documents": 0}
        return {"totals": {"documents": 150, "rejects": b_rejects, "rows_read": 200, "dropped_documents": 45},
                "config": {"run": {"max_reject_fraction": 0.1}, "output": {"dir": str(tmp_path)}},
                "shards": [{**shard, "unit": 0, "source": "/d/a.jsonl bytes [0, 9)", "documents": 100,
                            "rows_read": 100},
                           {**shard, "unit": 1, "source": "/d/b.jsonl bytes [0, 9)", "rejects": 25,
                            "rows_read": 50, "documents": 25, "dropped_documents": 25},
                           {**shard, "unit": 2, "source": "/d/b.jsonl bytes [9, 20)", "rejects": b_rejects - 25,
                            "rows_read": 50, "documents": 75 - b_rejects, "dropped_documents": 20}]}

    assert reject_share_warning(manifest(50), brief=True) is None
    assert reject_share_warning(manifest(60), brief=True) == (
        "1 input file had more than run.max_reject_fraction = 0.1 of its rows rejected: /d/b.jsonl (15 of 100 rows, "
        "15.0%)")


@needs_tiny
def test_documents_dropped_as_configured_do_not_count_toward_max_reject_fraction(tmp_path, capsys):
    """pack.overflow = "drop" is asked for (not the default), yet the documents it left out
    counted as rejects toward run.max_reject_fraction: a corpus of 30% long documents exited 2.
    They are still rejects (written aside, counted in the manifest and the summary), not bad
    rows: 30 dropped of 100 exits 0; with 15 bad rows too (15%) it exits 2, the line counting
    and naming the bad ones, its first reject a bad row, not a drop, and the fraction it
    suggests (0.15) passes. Rows: bl_gpt2_digits gives one token per digit, so 64 digits frame
    to 65 tokens (eos), over seq_len 64 (tests/test_pipeline_trust.py, _drop_corpus); of each 20
    rows, 0-5 are such documents, 6-8 not JSON (the second file only), the rest short texts."""
    long, short = json.dumps({"text": ("0123456789" * 7)[:64]}), json.dumps({"text": "12 34"})
    kinds = [("long" if i % 20 < 6 else "bad" if i % 20 < 9 else "short") for i in range(100)]
    for name, bad in (("drop", short), ("both", "{broken")):
        (tmp_path / f"{name}.jsonl").write_text("".join({"long": long, "bad": bad, "short": short}[k] + "\n"
                                                       for k in kinds))
        toml = _toml(tmp_path / f"{name}.toml", [str(tmp_path / f"{name}.jsonl")], tmp_path / name)
        toml.write_text(toml.read_text().replace("seq_len = 64\n", "seq_len = 64\noverflow = \"drop\"\n"))
    rc, err = _run_cli(capsys, tmp_path / "drop.toml")
    assert rc == 0 and "rmlprep: error" not in err, err
    assert "30 documents longer than seq_len dropped, written to rejects/" in err
    m = json.loads((tmp_path / "drop" / "manifest.json").read_text())
    assert (m["totals"]["rejects"], m["totals"]["dropped_documents"], m["rejects"]["by_stage"]) == (30, 30, {"pack": 30})
    rc, err = _run_cli(capsys, tmp_path / "both.toml")
    errors = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 2 and len(errors) == 1, err
    assert errors[0].startswith(
        "rmlprep: error: 15 of 100 rows were rejected (15.0% of rows read: read 15, not counting the 30 documents "
        "longer than pack.seq_len that pack.overflow = \"drop\" left out), more than run.max_reject_fraction = 0.1; "
        f"the first: {tmp_path / 'both.jsonl'} row 6: "), errors[0]
    assert "rerun with --max-reject-fraction 0.15 or set run.max_reject_fraction)" in errors[0]
    assert json.loads((tmp_path / "both" / "manifest.json").read_text())["rejects"]["by_stage"] == {"read": 15, "pack": 30}
    assert main(["run", str(tmp_path / "both.toml"), "--max-reject-fraction", "0.15"]) == 0


@needs_tiny
def test_a_run_that_drops_most_documents_warns_with_the_counts_and_the_option(tmp_path, capsys):
    """pack.overflow = "drop" leaving out 95 of 100 documents exited 0 with no warning (drops do
    not count toward run.max_reject_fraction since 117acc3): only the summary's over-long line
    said so. A share of drops over run.max_reject_fraction now gives one ``rmlprep: warning:``
    line (the counts, the share, pack.overflow, pack.seq_len, the limit and what keeps them) and
    a warning row in the summary; the run still exits 0. 5 drops of 100 (5%, under 0.1) give
    none, and neither do 95 with --max-reject-fraction 0.96. Rows: bl_gpt2_digits gives one
    token per digit, so 64 digits frame to 65 tokens (eos), over seq_len 64; the 95 dropped hold
    95 x 64 = 6,080 tokens of text (dropped_tokens counts no eos)."""
    long, short = json.dumps({"text": "7" * 64}), json.dumps({"text": "12 34"})
    for name, n_long in (("most", 95), ("few", 5)):
        (tmp_path / f"{name}.jsonl").write_text("".join((long if i < n_long else short) + "\n" for i in range(100)))
        toml = _toml(tmp_path / f"{name}.toml", [str(tmp_path / f"{name}.jsonl")], tmp_path / name)
        toml.write_text(toml.read_text().replace("seq_len = 64\n", "seq_len = 64\noverflow = \"drop\"\n"))
    rc, err = _run_cli(capsys, tmp_path / "most.toml")
    said = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 0 and said == [
        "rmlprep: warning: pack.overflow = \"drop\" left out 95 of the 100 rows read (95.0%) as longer than "
        f"pack.seq_len = 64 (6,080 tokens; written to {tmp_path / 'most' / 'rejects'}/), more than "
        "run.max_reject_fraction = 0.1, which drops do not count toward: a longer pack.seq_len or "
        "pack.overflow = \"wrap\" or \"truncate\" keeps them"], err
    assert re.search(r"^warning +95\.0% of the rows read dropped as longer than pack\.seq_len, more than "
                     r"run\.max_reject_fraction = 0\.1", err, re.M), err
    rc, err = _run_cli(capsys, tmp_path / "few.toml")
    # (the tiny tokenizer adds a BOS the run does not: that warning, test_pipeline_trust's, is another)
    assert rc == 0 and "warning" not in _no_bos(err) and "5 documents longer than seq_len dropped" in err, err
    assert main(["run", str(tmp_path / "most.toml"), "--overwrite", "--max-reject-fraction", "0.96"]) == 0
    assert "warning" not in _no_bos(capsys.readouterr().err)


def _no_bos(err: str) -> str:
    """``err`` without the log's line on a BOS the tokenizer adds and the run does not."""
    return "\n".join(x for x in err.splitlines() if not x.startswith("warning: pack: documents get no bos"))


@needs_tiny
def test_a_file_whose_every_row_is_rejected_is_named_in_a_warning(tmp_path, capsys):
    """One input file of 5 rows keyed ``content`` beside 100 rows keyed ``text``: 5 rejects,
    4.8% of the rows read, under run.max_reject_fraction = 0.1, so the run exited 0 with only
    the summary's count, the file's rows all gone. It still exits 0 (its rows are counted and
    in rejects/), now with one ``rmlprep: warning:`` line naming the file, its row count and
    its first reject, and a warning row in the summary. With one of its rows keyed ``text``
    there is no warning (a file with a document is not wholly rejected)."""
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(100)))
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps({"content": f"doc {i}"}) + "\n" for i in range(5)))
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "*.jsonl")], tmp_path / "out")
    rc, err = _run_cli(capsys, toml)
    said = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 0 and said == [
        f"rmlprep: warning: every row of 1 input file was rejected: {b} (5 rows); the first: row 0: no 'text' field "
        "(fields: ['content']); a file of another layout or encoding than the others (input.column, UTF-8)? its "
        f"rows are in {tmp_path / 'out' / 'rejects'}/"], err
    assert re.search(rf"^warning +every row of 1 input file was rejected: {re.escape(str(b))} \(5 rows\)$", err, re.M), err
    b.write_text("".join(json.dumps({"content" if i else "text": f"doc {i}"}) + "\n" for i in range(5)))
    rc, err = _run_cli(capsys, toml)  # 4 of its 5 rows rejected: test_a_file_mostly_rejected_...'s warning
    assert rc == 0 and "every row of" not in err and f"{b} (4 of 5 rows, 80.0%)" in err, err


@needs_tiny
def test_a_file_mostly_rejected_is_named_in_a_warning(tmp_path, capsys):
    """A glob of 1,000 good rows and a file of 100 whose rows 0, 1, 5, 6, 10, 11 ... (i % 5 < 2:
    40 rows) are Latin-1: 40 rejects, 40 / 1,100 = 3.6% of the rows read, under
    run.max_reject_fraction = 0.1, so the run exited 0 with only the summary's count and no word
    of the file that lost 40 of its 100 rows (the warning of commit 54a3a23 names only a file
    whose every row is rejected). It still exits 0, now with one ``rmlprep: warning:`` line naming
    the file, its counts and share and its first reject (row 0), and a warning row in the summary.
    Under --max-reject-fraction 0.5 the file's 40% passes: no warning."""
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(1000)))
    b = tmp_path / "b.jsonl"
    b.write_bytes(b"".join((json.dumps({"text": f"caf\u00e9 {i}"}, ensure_ascii=False) + "\n")
                           .encode("latin-1" if i % 5 < 2 else "utf-8") for i in range(100)))
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "*.jsonl")], tmp_path / "out")
    rc, err = _run_cli(capsys, toml)
    said = [x for x in err.splitlines() if x.startswith("rmlprep:")]
    assert rc == 0 and len(said) == 1, err
    assert said[0].startswith(
        f"rmlprep: warning: 1 input file had more than run.max_reject_fraction = 0.1 of its rows rejected: {b} (40 of "
        "100 rows, 40.0%); the first: row 0: line is not valid UTF-8 (invalid continuation byte at byte 13;"), err
    assert said[0].endswith(f"; the run's share (3.6%) is under it, so the run succeeds; the rows are in "
                            f"{tmp_path / 'out' / 'rejects'}/"), err
    assert re.search(rf"^warning +1 input file had more than run\.max_reject_fraction = 0\.1 of its rows rejected: "
                     rf"{re.escape(str(b))} \(40 of 100 rows, 40\.0%\)$", err, re.M), err
    assert main(["run", str(toml), "--max-reject-fraction", "0.5"]) == 0


@needs_tiny
def test_two_files_mostly_rejected_say_whose_first_reject_is_named(tmp_path, capsys):
    """Two files over the limit (b and c, 40 of 100 rows each, beside 3,000 good rows: 2.5% of
    the run): the line names both, and its first reject is b's, so it says so ("the first of
    B: row 0"); with one file it said "the first: row 0" and trial19 could not tell whose."""
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(3000)))
    for name in ("b", "c"):
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(
            (json.dumps({"text": f"caf\u00e9 {i}"}, ensure_ascii=False) + "\n")
            .encode("latin-1" if i % 5 < 2 else "utf-8") for i in range(100)))
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "*.jsonl")], tmp_path / "out")
    rc, err = _run_cli(capsys, toml)
    said = [x for x in err.splitlines() if x.startswith("rmlprep: warning: 2 input files")]
    assert rc == 0 and len(said) == 1, err
    assert f"; the first of {tmp_path / 'b.jsonl'}: row 0: line is not valid UTF-8" in said[0], said[0]
    assert "warning" not in capsys.readouterr().err


def _script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_pipelines_{name}", ROOT / "pipelines" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@needs_tiny
def test_the_pipeline_scripts_exit_as_rmlprep_run(tmp_path, capsys, monkeypatch):
    """pipelines/pretrain.py and sft.py exited 0 for a run whose every row was rejected (rmlprep
    run: 2, "an empty dataset is not a success") and 2 for a parity failure (rmlprep run: 3)
    (explorer G6). They now share the CLI's exit rules (rmlprep.cli.run_exit_status)."""
    import rmlprep.cli as cli_mod
    from rmlprep.errors import ParityError

    pretrain, sft = _script("pretrain"), _script("sft")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"txt": "a"}\n{"txt": "b"}\n')
    common = ["--tokenizer", str(TINY), "--workers", "1", "--seq-len", "32"]
    assert pretrain.main([str(bad), *common, "--output", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "rmlprep: error: every row was rejected (2 rows" in err and "Traceback" not in err, err
    assert sft.main([str(bad), *common, "--format", "chatml", "--text-markers", "--output", str(tmp_path / "s")]) == 2
    assert "every row was rejected (2 rows" in capsys.readouterr().err
    good = tmp_path / "good.jsonl"
    good.write_text('{"text": "12 34"}\n')
    assert pretrain.main([str(good), *common, "--output", str(tmp_path / "g")]) == 0
    out, err = capsys.readouterr()
    assert out == f"shards: {tmp_path / 'g'}\n"
    # the tiny tokenizer adds a BOS: the script leaves pack.bos out, so its run warns as rmlprep run's does
    # (polish21: a config naming pack.bos, as the script once did with bos=False, is not warned)
    assert "warning: pack: documents get no bos" in err, err
    assert "pack.bos" not in pretrain.config([str(good)], tokenizer=str(TINY), output=str(tmp_path / "g")).given
    half = tmp_path / "half.jsonl"  # 1 reject of 2 rows: over run.max_reject_fraction's default 0.1
    half.write_text('{"text": "12 34"}\n{"txt": "b"}\n')
    assert pretrain.main([str(half), *common, "--output", str(tmp_path / "h")]) == 2
    assert "1 of 2 rows were rejected (50.0% of rows read: read 1), more than run.max_reject_fraction" in \
        capsys.readouterr().err
    assert pretrain.main([str(half), *common, "--output", str(tmp_path / "h"), "--max-reject-fraction", "0.5"]) == 0

    def parity_fails(*a, **k):
        raise ParityError("12 34", 0, [1], [2], message="ids differ from the reference")

    monkeypatch.setattr(cli_mod, "run", parity_fails)
    assert pretrain.main([str(good), *common, "--output", str(tmp_path / "x")]) == 3
    assert sft.main([str(good), *common, "--format", "chatml", "--output", str(tmp_path / "y")]) == 3
    assert capsys.readouterr().err.count("rmlprep: parity failure, stopped before any corpus work: ids differ") == 2


@needs_tiny
def test_the_sft_script_names_a_system_column(tmp_path, capsys):
    """pipelines/sft.py reaches chat.system_column and chat.ignore_media (--system-column,
    --ignore-media) as it reaches chat.tools_column: without them a set with a system prompt
    column could only be refused."""
    sft = _script("sft")
    inp = tmp_path / "s.jsonl"
    inp.write_text(json.dumps({"system": "Be brief.", "images": ["a.png"], "messages": [
        {"role": "user", "content": "12"}, {"role": "assistant", "content": "34"}]}) + "\n")
    common = [str(inp), "--tokenizer", str(TINY), "--format", "chatml", "--text-markers", "--workers", "1"]
    assert sft.main([*common, "--output", str(tmp_path / "a")]) == 2
    assert "chat.system_column is unset" in capsys.readouterr().err
    assert sft.main([*common, "--system-column", "system", "--output", str(tmp_path / "b")]) == 2
    assert "has, in its first row, a field 'images'" in capsys.readouterr().err
    assert sft.main([*common, "--system-column", "system", "--ignore-media", "--output", str(tmp_path / "c")]) == 0
    assert sft.main([*common, "--system-column", "false", "--ignore-media", "--output", str(tmp_path / "d")]) == 0
    import pyarrow.parquet as pq
    from rmlprep.pipeline import open_tokenizer

    tok = open_tokenizer(str(TINY), log=lambda m: None)[0]
    text = {k: tok.decode(pq.read_table(tmp_path / k / "train-00000.parquet").column("input_ids")[0].as_py())
            for k in "cd"}
    assert text["c"].startswith("<|im_start|>system\nBe brief.<|im_end|>") and "Be brief." not in text["d"]


def test_out_of_memory_is_one_line(monkeypatch, capsys):
    """A MemoryError out of a command (numpy's "Unable to allocate 15 GiB ...") is exit 2 with one
    line, not a traceback."""
    import rmlprep.cli as cli_mod

    def boom(*a, **k):
        raise MemoryError("Unable to allocate 14.9 GiB for an array with shape (2000000000,) and data type int64")

    monkeypatch.setattr(cli_mod, "load_config", boom)
    rc = main(["run", "x.toml"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "out of memory: Unable to allocate 14.9 GiB" in err, err


@needs_tiny
@pytest.mark.parametrize("where", ["under-a-file", "is-a-file"])
def test_unusable_output_folder_is_one_line(tmp_path, capsys, where):
    (tmp_path / "d.jsonl").write_bytes(_good_rows(10))
    (tmp_path / "f").write_text("a file")
    out = tmp_path / "f" / "o" if where == "under-a-file" else tmp_path / "f"
    rc, err = _run_cli(capsys, _toml(tmp_path / "c.toml", [str(tmp_path / "d.jsonl")], out))
    assert rc == 2 and err.count("\n") == 1 and "output.dir" in err and "Traceback" not in err, err


def test_inspect_lists_the_other_control_tokens(capsys):
    """``special_tokens`` holds the tokens with a role (bos, eos, unk, pad, end of turn); a
    fresh-user trial read it as all of them (2 of Qwen2.5's, no <|im_start|>). The others are
    ``other_control_tokens``: expected from the tokenizer.json itself, its added tokens marked
    ``"special": true`` that have no role."""
    real = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")
    d = real / "hf" / "qwen2.5"
    if not (d / "tokenizer.json").is_file():
        pytest.skip(f"{d} not found (get.sh)")
    assert main(["inspect", str(d)]) == 0
    info = json.loads(capsys.readouterr().out)
    added = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    roles = {int(i) for i in info["special_tokens"]}
    want = {str(t["id"]): t["content"] for t in added if t["special"] and t["id"] not in roles}
    assert info["other_control_tokens"] == {"count": len(want), "first": want} and "<|im_start|>" in want.values()


@pytest.mark.parity
@pytest.mark.parametrize("model", ["qwen2.5", "gemma3"])
def test_inspect_lists_the_user_defined_tokens(capsys, model):
    """Qwen2.5's ``<tool_call>``, ``<|fim_prefix|>`` ... are added tokens without ``"special"``:
    Hugging Face ``tokenizers`` gives each one id wherever its text stands, even with
    ``encode_special_tokens`` (``--no-parse-special``, a run's default), and inspect listed none
    of them. Expected from ``tokenizers`` itself: its non-special added tokens, each checked to
    encode to its one id as plain text; Gemma 3's 6,406 are capped at the first 30 by id."""
    tokenizers = pytest.importorskip("tokenizers")
    real = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")
    d = real / "hf" / model
    if not (d / "tokenizer.json").is_file():
        pytest.skip(f"{d} not found (get.sh)")
    ref = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ref.encode_special_tokens = True  # special tokens' text is text: what stays one id is the others
    plain = {i: t.content for i, t in sorted(ref.get_added_tokens_decoder().items()) if not t.special}
    assert all(ref.encode(s, add_special_tokens=False).ids == [i] for i, s in plain.items())
    assert main(["inspect", str(d)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["user_defined_tokens"] == {"count": len(plain), "one_id_in_plain_text": True,
                                           "first": {str(i): s for i, s in list(plain.items())[:30]}}
    if model == "qwen2.5":
        assert "<tool_call>" in info["user_defined_tokens"]["first"].values()


def test_inspect_missing_path_in_plain_words(tmp_path):
    r = cli("inspect", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and r.stderr == f"rmlprep: error: {tmp_path / 'nope.json'}: no such file or directory\n"


#: Two units that each mark their start in D and sleep 60 s, and a 2-worker pool running them
#: that exits 130 saying "interrupted" on a KeyboardInterrupt (the Ctrl-C tests' child).
_SLEEPING_UNIT = (
    "def unit(u, d):\n"
    "    open(os.path.join(d, f'started-{u}'), 'w').close()\n"
    "    time.sleep(60)\n"
    "    return {}\n")
_POOL_UNTIL_INTERRUPTED = (
    "try:\n"
    "    with LocalEngine(2) as e:\n"
    "        for _ in e.imap_unordered(unit, [0, 1], (D,)):\n"
    "            pass\n"
    "except KeyboardInterrupt:\n"
    "    print('interrupted', file=sys.stderr)\n"
    "    sys.exit(130)\n")


def _communicate_or_kill(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``p.communicate(timeout)``; a child still running after it (the test fails on the
    TimeoutExpired) is killed with its process group, so no worker outlives the test."""
    try:
        return p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()


def _py(code: str, **kw) -> subprocess.Popen:
    """A child Python in its own process group, with SIGINT and SIGHUP at their default
    dispositions, as a terminal's foreground job has them: a shell without job control starts a
    background job (``pytest ... &`` in a script) with SIGINT ignored, ``nohup`` ignores SIGHUP,
    the child would inherit that, Python and rmlprep keep an ignored signal ignored, and the
    Ctrl-C and SIGHUP tests would wait for their 60 s units (seen in full suites run in the
    background, 2026-12-02, and under nohup, 2026-12-03)."""
    import signal

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    then = kw.pop("preexec_fn", None)

    def preexec():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if then is not None:
            then()

    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kw}
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True, preexec_fn=preexec, **kw)


def test_ctrl_c_during_import_is_one_line():
    """Ctrl-C while the script loads rmlprep.cli (pyarrow, numpy: ~0.3 s) printed a traceback
    from inside ``import pyarrow`` (a fresh-user trial, 3 of 3). The console script's module
    imports nothing heavy and turns it into the run's line: ``rmlprep: interrupted``, exit 130
    (128 + SIGINT). The interrupt is raised here by a finder asked for rmlprep.cli."""
    code = (
        "import sys\n"
        "class F:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'rmlprep.cli': raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, F())\n"
        "from rmlprep.console import entry\n"
        "entry()\n")
    p = _py(code)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert err == "rmlprep: interrupted\n"


@pytest.mark.parametrize("sig,status,line", [("SIGTERM", 143, "rmlprep: terminated (SIGTERM)\n"),
                                             ("SIGHUP", 129, "rmlprep: hung up (SIGHUP)\n")], ids=["term", "hup"])
def test_sigterm_during_import_is_one_line(sig, status, line):
    """SIGTERM while the script loads rmlprep.cli, before main installs its handler, ended the
    process silently (killed by the signal, no line). The console script's module handles it
    from its first line: ``rmlprep: terminated (SIGTERM)``, exit 143 (128 + SIGTERM); SIGHUP
    likewise, exit 129. Here a finder asked for rmlprep.cli says so on stdout and waits for the
    signal."""
    import signal

    code = (
        "import sys, time\n"
        "class F:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'rmlprep.cli':\n"
        "            print('loading', flush=True)\n"
        "            time.sleep(30)\n"
        "sys.meta_path.insert(0, F())\n"
        "from rmlprep.console import entry\n"
        "entry()\n")
    p = _py(code)
    assert p.stdout.readline() == "loading\n"
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=60)
    assert p.returncode == status
    assert err == line


def test_ctrl_c_reaches_no_worker():
    """Ctrl-C in a terminal signals the whole process group. The pool's workers printed
    ``Process ForkPoolWorker-N: Traceback ... KeyboardInterrupt`` from the middle of their unit
    (a fresh-user trial, 3 of ~10 interrupts); they ignore SIGINT now, and the parent's
    KeyboardInterrupt leaves the pool (which terminates them). Here two workers each start a
    unit that sleeps; SIGINT goes to the group once both have started."""
    import signal
    import time

    code = (
        "import os, sys, time\n"
        "from rmlprep.pipeline.engines import LocalEngine\n"
        + _SLEEPING_UNIT
        + _POOL_UNTIL_INTERRUPTED)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = _py(code.replace("(D,)", f"({d!r},)"))
        deadline = time.monotonic() + 60
        while not all((Path(d) / f"started-{u}").exists() for u in (0, 1)):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err == "interrupted\n"


def test_ctrl_c_handled_off_the_waiting_thread_stops_the_pool():
    """Python's SIGINT handler only sets a flag; the run's thread raises KeyboardInterrupt when it
    next runs Python code. Waiting for a unit's result without a timeout, it is woken by the
    signal only if the signal interrupts that very wait: one handled just before it blocked
    (preempted between its last check and the wait, on a loaded machine) or by another thread
    left the run sleeping until a unit ended (the test above, once in a full suite on a loaded
    machine: no exit within 60 s). Here a thread of the run's process takes the SIGINT itself
    (pthread_kill) once both 60 s units have started: the pool is left at once."""
    import tempfile

    code = (
        "import os, signal, sys, threading, time\n"
        "from rmlprep.pipeline.engines import LocalEngine\n"
        + _SLEEPING_UNIT
        + "def interrupt(d):\n"
        "    while not all(os.path.exists(os.path.join(d, f'started-{u}')) for u in (0, 1)):\n"
        "        time.sleep(0.05)\n"
        "    signal.pthread_kill(threading.get_ident(), signal.SIGINT)\n"
        "threading.Thread(target=interrupt, args=(D,), daemon=True).start()\n"
        + _POOL_UNTIL_INTERRUPTED)
    with tempfile.TemporaryDirectory() as d:
        p = _py(code.replace("(D,)", f"({d!r},)"))
        out, err = _communicate_or_kill(p, 45)
    assert (p.returncode, err) == (130, "interrupted\n")


def test_a_worker_killed_mid_unit_ends_the_run_with_an_error():
    """trial22: ``kill -9`` of one pool worker (as the OOM killer does) mid-run left the run
    waiting forever with 28 of 29 units done: the pool started another worker, but the killed
    one's unit was lost and the pool's ``imap_unordered`` waits for its result. Here unit 1's
    worker kills itself while unit 0 sleeps 60 s: the run ends within seconds with an
    RmlprepError naming the worker's pid and SIGKILL."""
    code = (
        "import os, signal, sys, time\n"
        "from rmlprep.errors import RmlprepError\n"
        "from rmlprep.pipeline.engines import LocalEngine\n"
        "def unit(u):\n"
        "    if u == 1:\n"
        "        print(os.getpid(), flush=True)\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    time.sleep(60)\n"
        "    return {}\n"
        "try:\n"
        "    with LocalEngine(2) as e:\n"
        "        for _ in e.imap_unordered(unit, [0, 1], ()):\n"
        "            pass\n"
        "except RmlprepError as err:\n"
        "    print(err, file=sys.stderr)\n"
        "    sys.exit(2)\n")
    p = _py(code)
    out, err = _communicate_or_kill(p, 45)
    assert p.returncode == 2, err
    assert f"a worker process (pid {out.split()[0]}) was killed by SIGKILL" in err
    assert "rerun the same command to resume" in err


@needs_tiny
def test_a_run_whose_output_pipe_closes_finishes(tmp_path):
    """A careless-user check: `rmlprep run c.toml 2>&1 | head -2` stopped the run at the first
    report line written after the reader left, with part of the shards, no manifest, and exit 0
    (a broken pipe was taken for `encode | head`). The run's reports now go nowhere once their
    reader leaves and the run finishes: exit 0 and the same shards as a run nobody stopped
    reading."""
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": f"words {i} " * 40}) + "\n" for i in range(120)))
    runs = {}
    for name in ("read", "left"):
        toml = _toml(tmp_path / f"{name}.toml", [str(tmp_path / "d.jsonl")], tmp_path / name)
        toml.write_text(toml.read_text().replace('progress = "none"', 'progress = "log"'))
        p = subprocess.Popen([sys.executable, "-m", "rmlprep.cli", "run", str(toml)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, cwd=ROOT)
        if name == "left":
            p.stdout.readline()
            p.stdout.close()  # the reader leaves, as `| head -1` does
        else:
            p.stdout.read()
        assert p.wait(timeout=120) == 0
        m = json.loads((tmp_path / name / "manifest.json").read_text())
        runs[name] = [(s["shard"], s["documents"]) for s in m["shards"]]
    assert len(runs["read"]) > 3 and runs["left"] == runs["read"]


def _run_with_a_sleeping_unit(tmp_path: Path, **popen) -> tuple[subprocess.Popen, Path, Path]:
    """A CLI run (2 workers, 120 documents) whose unit 1 writes its files, then writes its worker's
    pid into ``started`` and sleeps 60 s; returns (the process, the toml, the output folder),
    once unit 1 has started sleeping. ``popen``: :func:`_py`'s keywords."""
    import time

    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": f"words {i} " * 40}) + "\n" for i in range(120)))
    out = tmp_path / "o"
    toml = _toml(tmp_path / "c.toml", [str(tmp_path / "d.jsonl")], out)
    started = tmp_path / "started"
    code = (
        "import os, sys, time\n"
        "from rmlprep.pipeline import driver\n"
        "real = driver.work_unit\n"
        "def unit(u, *a):\n"
        "    rec = real(u, *a)\n"
        "    if u.index == 1:\n"
        "        open(STARTED, 'w').write(str(os.getpid()))\n"
        "        time.sleep(60)\n"
        "    return rec\n"
        "driver.work_unit = unit\n"
        "from rmlprep.cli import main\n"
        "sys.exit(main(['run', TOML, '--workers', '2']))\n"
    ).replace("STARTED", repr(str(started))).replace("TOML", repr(str(toml)))
    p = _py(code, **popen)
    deadline = time.monotonic() + 120
    while not (started.exists() and started.read_text()):
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    return p, toml, out


@needs_tiny
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_workers_die_with_a_killed_run(tmp_path):
    """A run killed with SIGKILL (the OOM killer, ``kill -9``) left its workers finishing their
    units, holding the folder's lock (inherited with the fork): a rerun exited 2 naming the
    killed pid (a fresh-user trial). Now the kernel kills each worker with its run. Here unit 1
    sleeps 60 s in its worker after its files are written; once the run is killed, that worker
    is gone within seconds and a rerun with --resume takes the folder."""
    import time

    p, toml, out = _run_with_a_sleeping_unit(tmp_path)
    worker = int((tmp_path / "started").read_text())
    p.kill()
    p.wait(timeout=30)  # not communicate(): a worker left alive would hold its pipes open
    for f in (p.stdout, p.stderr):
        if f is not None:
            f.close()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{worker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{worker}"), "the worker outlived its run"
    assert main(["run", str(toml), "--resume"]) == 0


@needs_tiny
@pytest.mark.parametrize("sig,status,words", [
    ("SIGTERM", 143, "terminated (SIGTERM)"),
    ("SIGHUP", 129, "hung up (SIGHUP: the terminal or session closed)")], ids=["term", "hup"])
@pytest.mark.parametrize("group", [False, True], ids=["parent", "group"])
def test_sigterm_is_one_line_and_exit_143(tmp_path, group, sig, status, words):
    """SIGTERM (``kill PID``; ``docker stop`` or a scheduler signal the whole group) exited 143
    without a word. Now it unwinds as Ctrl-C does: one line, exit 143 (128 + 15), no worker
    traceback, no temporary left, the lock released, and a rerun resumes the done units. Here
    unit 1 sleeps in its worker after its files are written; the signal comes once it has, while
    the other worker waits for a task (holding the task queue's lock: a worker killed by the
    group's signal there left the parent's pool waiting for that lock forever). SIGHUP (a closed
    terminal or SSH session, ``kill -HUP``) ended the run by its default action: exit 129 with a
    ``train-NNNNN.parquet.tmp-PID`` and ``.rmlprep.lock`` left behind; it unwinds the same way,
    exit 129 (128 + 1)."""
    import signal

    p, toml, out = _run_with_a_sleeping_unit(tmp_path)
    (os.killpg if group else os.kill)(p.pid, getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    assert p.returncode == status, err
    assert err.splitlines()[-1] == f"rmlprep: {words}; the done units stay and --resume continues", err
    assert not (out / ".rmlprep.lock").exists()
    assert "Traceback" not in err and not list(out.rglob("*.tmp-*"))
    assert main(["run", str(toml), "--resume"]) == 0  # the lock was released; done units are kept


@needs_tiny
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pty's hangup as Linux delivers it")
def test_a_closed_terminal_stops_the_run_as_ctrl_c_does(tmp_path):
    """A run in a terminal that closes (an SSH session dropped, a terminal window closed): the
    kernel hangs the terminal up, signals SIGHUP to the session's processes, and every later
    write to it fails (EIO). The run died by SIGHUP's default action, leaving a temporary shard
    and the folder's lock. Here the run's stdout and stderr are a pseudo-terminal it controls,
    and the test closes the terminal's other end while unit 1 sleeps in its worker: the run
    exits 129 (128 + SIGHUP), leaves no temporary, releases the lock (its line went nowhere:
    the terminal is gone), and a rerun resumes the done units."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()

    def controlling_terminal():  # the session leader (start_new_session) takes the pty as its terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        p, toml, out = _run_with_a_sleeping_unit(tmp_path, stdin=slave, stdout=slave, stderr=slave,
                                                 preexec_fn=controlling_terminal)
    finally:
        os.close(slave)
    os.close(master)  # the terminal hangs up
    assert p.wait(timeout=60) == 129
    assert not list(out.rglob("*.tmp-*")) and not (out / ".rmlprep.lock").exists()
    assert main(["run", str(toml), "--resume"]) == 0


def test_a_sighup_that_nohup_ignores_stays_ignored():
    """``nohup rmlprep run ...`` asks the run to outlive its terminal: SIGHUP is ignored when the
    command starts, and the command keeps it so (a handler would stop the run that nohup
    keeps); a SIGHUP at its default action becomes the run's stop, put back afterwards."""
    import signal
    import time

    from rmlprep.cli_signals import Stopped, signals_unwind

    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with signals_unwind():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing is raised
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with pytest.raises(Stopped) as e, signals_unwind():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(10)  # the handler raises within it
        assert (e.value.signum, signal.getsignal(signal.SIGHUP)) == (signal.SIGHUP, signal.SIG_DFL)
    finally:
        signal.signal(signal.SIGHUP, before)


@needs_tiny
@pytest.mark.parametrize("sig,status,line", [("SIGTERM", 143, "rmlprep: terminated (SIGTERM)\n"),
                                             ("SIGHUP", 129, "rmlprep: hung up (SIGHUP: the terminal or session closed)\n")],
                         ids=["term", "hup"])
def test_a_stopped_command_that_is_not_a_run_names_no_done_units(monkeypatch, capsys, sig, status, line):
    """``rmlprep encode TOK`` waiting on stdin and stopped by SIGTERM or SIGHUP said "...; the done
    units stay and --resume continues": it has no units and nothing to resume. A run's line
    keeps those words (test_sigterm_is_one_line_and_exit_143)."""
    import signal

    import rmlprep.cli as cli
    from rmlprep.cli_signals import Stopped

    def stopped():
        raise Stopped(getattr(signal, sig))

    monkeypatch.setattr(cli, "stdin_text", stopped)
    assert main(["encode", str(TINY)]) == status
    assert capsys.readouterr().err == line


def test_a_second_stop_signal_does_not_cut_the_unwinding_short():
    """A closed terminal signals a foreground run twice (the shell passes its SIGHUP on to its
    jobs, then the kernel sends one as the shell exits), and ``kill`` then a scheduler's
    SIGTERM can too. The second raised Stopped again inside the unwinding: two SIGHUPs (or
    SIGTERMs) 0.5 ms apart to a run's group hung it at exit in 8 of 8 tries (the pool's
    terminate cut short, a worker it had not killed yet still in its unit, joined by
    multiprocess at exit) where one signal exits at once. From the first stop signal on, the
    others are ignored until the block ends; the handlers then come back as they were. Here a
    SIGHUP stops the block and a SIGHUP and a SIGTERM come in during its cleanup."""
    import signal
    import time

    from rmlprep.cli_signals import Stopped, signals_unwind

    before = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGTERM)}
    cleaned = []
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a terminal's job; under nohup it stays ignored
        with pytest.raises(Stopped) as e, signals_unwind():
            try:
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(10)  # the handler raises within it
            finally:  # the unwinding
                os.kill(os.getpid(), signal.SIGHUP)
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)  # a handler would raise within it
                cleaned.append(True)
        assert cleaned == [True] and e.value.signum == signal.SIGHUP
        assert {s: signal.getsignal(s) for s in before} == {signal.SIGHUP: signal.SIG_DFL,
                                                             signal.SIGTERM: before[signal.SIGTERM]}
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_a_stop_signal_after_the_stopped_block_adds_no_second_line(monkeypatch, capsys):
    """The kernel's SIGHUP can come after the shell's has stopped the run and the block has put
    the console script's handler back (``rmlprep.console._terminated``): it printed a second
    ``rmlprep: hung up (SIGHUP)`` line under the first and exited on the spot (review13/14).
    Worked example: the handler in place before the block is ``_terminated`` (as ``entry`` sets
    it); a SIGHUP stops the block; a second SIGHUP after it writes nothing and does not exit (the
    command is exiting 129 with its one line). Before any command was stopped, ``_terminated``
    still says its line and exits 129 (the window while rmlprep.cli loads)."""
    import signal
    import time

    import rmlprep.cli_signals as cs
    import rmlprep.console as console
    from rmlprep.cli_signals import Stopped, signals_unwind

    exits = []
    monkeypatch.setattr(console.os, "_exit", exits.append)
    monkeypatch.setattr(cs, "stopped_by", None, raising=False)
    console._terminated(signal.SIGHUP, None)  # no command stopped yet: the line and 129
    assert exits == [129] and capsys.readouterr().err == "rmlprep: hung up (SIGHUP)\n"
    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, console._terminated)
        with pytest.raises(Stopped), signals_unwind():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(10)  # the handler raises within it
        assert signal.getsignal(signal.SIGHUP) is console._terminated
        os.kill(os.getpid(), signal.SIGHUP)  # the kernel's, after the block
        time.sleep(0.05)
        assert exits == [129] and capsys.readouterr().err == ""
    finally:
        signal.signal(signal.SIGHUP, before)


@needs_tiny
def test_run_from_another_folder_says_how_relative_paths_resolved(tmp_path, monkeypatch, capsys):
    """A config whose relative paths assume the project folder, run from elsewhere (a
    fresh-user trial): the error shows the path resolved (absolute), says it resolved against
    the current directory, not the config file's folder, and where such a path exists. A path
    given absolute gets no such note."""
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    (proj / "configs").mkdir(parents=True)
    (proj / "data").mkdir()
    elsewhere.mkdir()
    (proj / "data" / "a.jsonl").write_text('{"text": "hello"}\n')
    toml = proj / "configs" / "c.toml"
    body = ('[input]\npaths = ["{inp}"]\n[tokenizer]\npath = "{tok}"\n[pack]\nseq_len = 64\n'
            '[output]\ndir = "out/c"\n[run]\nprogress = "none"\nhistogram = false\n')
    monkeypatch.chdir(elsewhere)
    cases = [("data/*.jsonl", TINY, "input.paths: the glob '{cwd}/data/*.jsonl' matches no file (input.paths gives "
              "'data/*.jsonl': a relative path in a config resolves against the current directory, {cwd}, not "
              "against the config file's folder, {proj}/configs; {proj}/data/*.jsonl matches: run from {proj}, "
              "or give the absolute path)"),
             ("data/a.jsonl", "tok.json", "tokenizer.path: {cwd}/tok.json does not exist (tokenizer.path gives "
              "'tok.json': a relative path in a config resolves against the current directory, {cwd}, not "
              "against the config file's folder, {proj}/configs)"),
             (str(elsewhere / "nope.jsonl"), TINY, "input.paths: {cwd}/nope.jsonl does not exist\n")]
    for inp, tok, want in cases:
        toml.write_text(body.format(inp=inp, tok=tok))
        assert main(["run", str(toml)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and want.format(cwd=elsewhere, proj=proj) in err, err
    assert not (elsewhere / "out").exists()
    # parity.fixture is checked once the run holds its folder (a review finding: it had no note)
    toml.write_text(body.format(inp=str(proj / "data" / "a.jsonl"), tok=TINY) + '[parity]\nfixture = "fx.json"\n')
    assert main(["run", str(toml)]) == 2
    err = capsys.readouterr().err
    assert ("(parity.fixture gives 'fx.json': a relative path in a config resolves against the current directory, "
            f"{elsewhere}, not against the config file's folder, {proj}/configs)") in err, err



@needs_tiny
def test_run_from_the_configs_folder_names_the_project_folder(tmp_path, monkeypatch, capsys):
    """``cd configs; rmlprep run pretrain.toml`` (trial19, the clone's own configs, whose paths
    say ``../shared/...`` from the clone's root): the path resolved against configs/ and the
    error, skipping the hint since the config's folder was the current directory, never named
    the folder above it, the clone's root, where the path exists (found there from any other
    folder). Worked example: proj/configs/c.toml gives 'data/*.jsonl'; proj/data/a.jsonl
    exists; run from proj/configs, the line says proj/data/*.jsonl matches: run from proj."""
    proj = tmp_path / "proj"
    (proj / "configs").mkdir(parents=True)
    (proj / "data").mkdir()
    (proj / "data" / "a.jsonl").write_text('{"text": "hello"}\n')
    toml = proj / "configs" / "c.toml"
    toml.write_text(f'[input]\npaths = ["data/*.jsonl"]\n[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 64\n'
                    '[output]\ndir = "out/c"\n[run]\nprogress = "none"\nhistogram = false\n')
    monkeypatch.chdir(proj / "configs")
    assert main(["run", "c.toml"]) == 2
    err = capsys.readouterr().err
    cwd = proj / "configs"
    want = (f"input.paths: the glob '{cwd}/data/*.jsonl' matches no file (input.paths gives 'data/*.jsonl': a "
            f"relative path in a config resolves against the current directory, {cwd}, the config file's folder; "
            f"{proj}/data/*.jsonl matches: run from {proj}, or give the absolute path)")
    assert err.count("\n") == 1 and want in err, err
    assert not (cwd / "out").exists()

def _tiny_run_config(path: Path, inp: str, out: str) -> Path:
    """A pretraining config at ``path`` reading ``inp`` into ``out`` with the tiny tokenizer, quiet."""
    path.write_text(f'[input]\npaths = ["{inp}"]\n[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 64\n'
                    f'[output]\ndir = "{out}"\n[run]\nprogress = "none"\nhistogram = false\n')
    return path


@needs_tiny
@pytest.mark.parametrize("where", ["input", "output"])
def test_an_unknown_scheme_is_one_line_naming_the_path(tmp_path, monkeypatch, capsys, where):
    """``foo://x/y.jsonl`` (a scheme neither pyarrow nor fsspec knows: fsspec says "Protocol not
    known: foo") as an input path or as ``output.dir`` ended the run with a ValueError traceback,
    exit 1 (review14). Now one line naming the URI (and the key ``input.paths[0]`` for an
    input), exit 2."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    inp, out = ("foo://x/y.jsonl", "out") if where == "input" else ("a.jsonl", "foo://x/out")
    _tiny_run_config(tmp_path / "c.toml", inp, out)
    assert main(["run", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    want = "input.paths[0]: foo://x/y.jsonl: " if where == "input" else "foo://x/out: "
    assert err.count("\n") == 1 and err.startswith(f"rmlprep: error: {want}foo:// is not a filesystem"), err
    assert "Protocol not known: foo" in err


@needs_tiny
@pytest.mark.parametrize("where", ["input", "output"])
def test_an_unreachable_gcs_bucket_is_one_line_in_seconds(tmp_path, monkeypatch, capsys, where):
    """``gs://bucket/x.jsonl`` with no network: pyarrow's GCS client (google-cloud-cpp) retried
    its first request for 15 minutes by default, and the run hung silently all that time
    (review14). Now the first request to a bucket stops retrying after ``fs.GCS_REACH_SECONDS``
    (4) and the run ends with one line naming the URI (and ``input.paths[0]`` for an input),
    exit 2. The endpoint is made unreachable here (127.0.0.1:9 refuses, anonymous client), as
    this test cannot know whether its machine has a network."""
    import time

    import pyarrow.fs as pafs

    real = pafs.GcsFileSystem
    monkeypatch.setattr(pafs, "GcsFileSystem", lambda **kw: real(anonymous=True, scheme="http",
                                                                 endpoint_override="127.0.0.1:9", **kw))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    inp, out = ("gs://bucket/x.jsonl", "out") if where == "input" else ("a.jsonl", "gs://bucket/out")
    _tiny_run_config(tmp_path / "c.toml", inp, out)
    t0 = time.monotonic()
    assert main(["run", str(tmp_path / "c.toml")]) == 2
    assert time.monotonic() - t0 < 60
    err = capsys.readouterr().err
    want = "input.paths[0]: gs://bucket/x.jsonl: " if where == "input" else "gs://bucket/out: "
    assert err.count("\n") == 1, err
    assert err.startswith(f"rmlprep: error: {want}Google Cloud Storage cannot be reached (no answer in 4 s"), err
    assert "Could not connect to server" in err


@needs_tiny
def test_ctrl_c_in_a_run_says_the_done_units_stay(tmp_path, monkeypatch, capsys):
    """Ctrl-C (a KeyboardInterrupt) ends a run with exit 130 and the line SIGTERM's has
    (``rmlprep: terminated (SIGTERM); the done units stay and --resume continues``): README,
    "Exit codes": ``rmlprep: interrupted; the done units stay and --resume continues``. It said
    ``rmlprep: interrupted`` alone, with no word of how to go on (trial17). Another command
    (encode) has no units: ``rmlprep: interrupted``. A run stopped before any unit was done
    (its config being read, its tokenizer loaded, the output folder not made yet) said the
    done units stay too (trial20): it now says ``no unit was done: rerun the command``, and a
    run stopped after its unit was done (the marker in the folder) keeps the first words."""
    import rmlprep.cli as cli

    def stop(*a, **k):
        raise KeyboardInterrupt

    real_run = cli.run

    def stop_after(cfg, **k):  # the unit done and committed, then Ctrl-C
        real_run(cfg, **k)
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    _tiny_run_config(tmp_path / "c.toml", "a.jsonl", "out")
    for where, patch in (("command", lambda: monkeypatch.setitem(cli._COMMANDS, "run", stop)),
                         ("run", lambda: monkeypatch.setattr(cli, "run", stop))):
        monkeypatch.chdir(tmp_path)
        patch()  # the interrupt before the config is read, then inside the run before its folder exists
        assert main(["run", str(tmp_path / "c.toml")]) == 130, where
        assert capsys.readouterr().err.splitlines()[-1] == "rmlprep: interrupted; no unit was done: rerun the command"
        assert not (tmp_path / "out").exists()
        monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "run", stop_after)
    assert main(["run", str(tmp_path / "c.toml")]) == 130
    assert list((tmp_path / "out").glob("shard-*.done.json"))
    assert capsys.readouterr().err.splitlines()[-1] == \
        "rmlprep: interrupted; the done units stay and --resume continues"
    monkeypatch.setitem(cli._COMMANDS, "encode", stop)
    assert main(["encode", str(TINY), "hi"]) == 130
    assert capsys.readouterr().err == "rmlprep: interrupted\n"

