"""load_tokenizer: dispatch on the path, tokenizer_config.json, overrides, errors."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rmlprep
from rmlprep import LoaderError, Tokenizer, UnsupportedTokenizer, load_tokenizer
from tools.make_parity_fixtures import real_dir

REAL = real_dir()


def _tiny_json() -> dict:
    return {
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "normalizer": None,
        "added_tokens": [{"id": 3, "content": "<s>", "special": True}],
        "post_processor": None,
        "decoder": {"type": "ByteLevel"},
    }


def _need(rel: str) -> Path:
    p = REAL / rel
    if not p.exists():
        pytest.skip(f"real tokenizer {p} is absent: run ../shared/real-tokenizers/get.sh")
    return p


def test_package_exports():
    assert rmlprep.load_tokenizer is load_tokenizer and rmlprep.Tokenizer is Tokenizer
    assert {"load_tokenizer", "Tokenizer"} <= set(rmlprep.__all__)


def test_directory_file_and_config(tmp_path):
    # add_bos_token is read for a class that rebuilds the post-processor from it, and both
    # transformers versions add the BOS here: LlamaTokenizerFast (4.57.1: the key), a
    # post-processor adding <s> (5.24.0) (fixtures/framing.json, "LlamaTokenizerFast|bos|bosT")
    pp = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                   {"Sequence": {"id": "A", "type_id": 0}}],
          "special_tokens": {"<s>": {"id": "<s>", "ids": [3], "tokens": ["<s>"]}}}
    (tmp_path / "tokenizer.json").write_text(json.dumps({**_tiny_json(), "post_processor": pp}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "add_bos_token": True,
         "chat_template": "{{ messages }}"}))
    for path in (tmp_path, tmp_path / "tokenizer.json", str(tmp_path)):
        tok = load_tokenizer(path)
        assert tok.encode("ab", add_special_tokens=True) == [3, 2]
        assert tok.chat_template == "{{ messages }}"


def test_overrides_replace_spec_fields(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    tok = load_tokenizer(tmp_path, bos_id=3, add_bos=True, eot_ids=[3])
    assert tok.encode("ab", add_special_tokens=True) == [3, 2] and tok.spec.eot_ids == (3,)


def test_unknown_override_is_named(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    with pytest.raises(LoaderError, match=r"unknown override\(s\) \['add_bos_tokn'\]"):
        load_tokenizer(tmp_path, add_bos_tokn=True)


def test_override_that_breaks_the_spec_is_a_loader_error(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    with pytest.raises(LoaderError, match="add_bos is set but bos_id is None"):
        load_tokenizer(tmp_path, add_bos=True)


def test_tiktoken_arguments_only_for_rank_files(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    with pytest.raises(LoaderError, match="only apply to tiktoken rank files"):
        load_tokenizer(tmp_path, name="gpt2")


def test_tiktoken_arguments_given_as_none_are_not_given(tmp_path):
    """name=None / pattern=None / special_tokens=None mean "not given" (as the CLI and a run
    config pass them): a tokenizer.json loads as without them (they were refused as tiktoken
    arguments), and a SentencePiece .model is not read as a rank file."""
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    plain = load_tokenizer(tmp_path)
    tok = load_tokenizer(tmp_path, name=None, pattern=None, special_tokens=None)
    assert tok.spec.fingerprint == plain.spec.fingerprint
    assert tok.encode("hello world") == plain.encode("hello world")
    pytest.importorskip("rmlprep.spm")
    assert load_tokenizer(_need("llama2/tokenizer.model"), name=None).vocab_size == 32000


def test_a_git_lfs_pointer_is_named(tmp_path):
    """A Hub repository cloned without git-lfs holds, in place of tokenizer.json, tokenizer.model
    or a .gguf, a ~130-byte text pointer. It was "not valid JSON (Expecting value: line 1 column 1)"
    for a tokenizer.json and "not a tokenizer file rmlprep recognises" for the others (explorer6),
    while an input file in that state is named (readers/sniff.py); now the load names it too."""
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 9085657\n"
    for name in ("tokenizer.json", "tokenizer.model", "model.gguf"):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).write_bytes(pointer)
        for path in (folder, folder / name):
            with pytest.raises(LoaderError, match=rf"{name}: is a Git LFS pointer, .*git lfs pull"):
                load_tokenizer(path)


def test_missing_paths(tmp_path):
    with pytest.raises(LoaderError, match="no such file or directory"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(LoaderError, match="holds no tokenizer.json or tokenizer.model"):
        load_tokenizer(tmp_path)


def test_a_tekken_file_is_named_as_what_it_is(tmp_path):
    """Mistral's tekken.json (mistral-common's own format, the tokenizer of Mistral-Nemo and the
    mistral-v3-tekken / -v7-tekken formats) was refused as "not a Hugging Face tokenizer.json
    (no "model" entry)", and a folder holding only it as holding no tokenizer: both now say it is
    a tekken file, which rmlprep does not read, and to give the model's tokenizer.json. The file
    is mistral-common 1.13.1's own (``mistral_common/data/tekken_240718.json``)."""
    mc = pytest.importorskip("mistral_common")
    src = Path(mc.__file__).parent / "data" / "tekken_240718.json"
    if not src.is_file():
        pytest.skip(f"{src} is absent")
    shutil.copy(src, tmp_path / "tekken.json")
    for path in (tmp_path / "tekken.json", tmp_path):
        with pytest.raises(LoaderError, match=r"a Mistral tekken file \(mistral-common's tokenizer format\), which "
                           r"rmlprep does not read: give the model's tokenizer.json"):
            load_tokenizer(path)


@pytest.mark.parametrize("name,data,message", [
    pytest.param("notes.txt", b"hello\n", "not a tokenizer file rmlprep recognises", id="text"),
    pytest.param("corpus.jsonl", b'{"text": "a"}\n', "not a tokenizer file rmlprep recognises", id="jsonl"),
    pytest.param("empty.model", b"", "not a tokenizer file rmlprep recognises", id="empty"),
    pytest.param("config.json", b'{"vocab_size": 5}', r'not a Hugging Face tokenizer\.json \(no "model" entry\)',
                 id="json-object"),
    pytest.param("list.json", b"[1, 2]", r"not a Hugging Face tokenizer\.json \(a JSON list at the top level\)",
                 id="json-list"),
])
def test_a_file_that_is_no_tokenizer_is_named_so(tmp_path, name, data, message):
    """A file of no format rmlprep reads is refused as such, with the formats it reads, not as
    a corrupt SentencePiece model (what every unrecognised file used to be read as)."""
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(LoaderError, match=message) as e:
        load_tokenizer(p)
    assert "SentencePiece model at byte" not in str(e.value)
    assert "tokenizer.json" in str(e.value) and "GGUF" in str(e.value) and "tiktoken" in str(e.value)


def test_a_truncated_sentencepiece_model_is_still_called_one(tmp_path):
    real = _need("llama2/tokenizer.model")
    p = tmp_path / "cut.model"
    p.write_bytes(real.read_bytes()[:1000])
    with pytest.raises(LoaderError, match=r"corrupt or truncated SentencePiece model at byte \d+"):
        load_tokenizer(p)


def test_unsupported_json_passes_through(tmp_path):
    d = _tiny_json()
    d["model"]["type"] = "Unigram"
    (tmp_path / "tokenizer.json").write_text(json.dumps(d))
    with pytest.raises(UnsupportedTokenizer, match="model.type = 'Unigram' is not supported"):
        load_tokenizer(tmp_path)


def test_tiktoken_file_with_explicit_pattern(tmp_path):
    p = tmp_path / "my.tiktoken"
    tokens = [bytes([b]) for b in range(256)] + [b"ab"]  # every byte has a rank (rank = byte)
    p.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    tok = load_tokenizer(p, pattern=r"\S+|\s+", special_tokens={"<|e|>": 257}, eos_id=257)
    assert tok.encode("ab<|e|>") == [256, 257] and tok.eos_id == 257


def test_real_tiktoken_files_by_content():
    tok = load_tokenizer(_need("llama3/llama3.tiktoken"))
    assert tok.vocab_size == 128256 and tok.bos_id == 128000
    tok = load_tokenizer(_need("gpt2/gpt2.tiktoken"), name="gpt2")
    assert tok.encode("hello world") == [31373, 995]


def test_llama3_tokenizer_model_is_a_rank_file(tmp_path):
    """Meta ships Llama 3's ranks as tokenizer.model: a directory holding it loads as tiktoken."""
    src = _need("llama3/llama3.tiktoken")
    shutil.copy(src, tmp_path / "tokenizer.model")
    tok = load_tokenizer(tmp_path, name="llama3")
    assert tok.encode("<|begin_of_text|>hi") == [128000, 6151]


def test_gguf_dispatch():
    pytest.importorskip("rmlprep.gguf")
    tok = load_tokenizer(_need("gguf/ggml-vocab-gpt-2.gguf"))
    assert tok.vocab_size > 50000


def test_sentencepiece_dispatch():
    pytest.importorskip("rmlprep.spm")
    tok = load_tokenizer(_need("llama2/tokenizer.model"))
    assert tok.vocab_size == 32000


def test_print_shows_kind_size_specials_and_pre_split():
    path = _need("hf/llama3")
    out = subprocess.run(
        [sys.executable, "-c", f"import rmlprep; print(rmlprep.load_tokenizer({str(path)!r}))"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    for part in ("kind=byte_level_bpe", "vocab_size=128256", "bos_id=128000", "eos_id=128001",
                 "eot_ids=[128009]", "pre_split=['llama3']"):
        assert part in out, (part, out)


def test_pickles_as_spec(tmp_path):
    import pickle

    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    tok = load_tokenizer(tmp_path)
    again = pickle.loads(pickle.dumps(tok))
    assert again.fingerprint == tok.fingerprint and again.encode("ab") == [2]


# -- demo: names ---------------------------------------------------------------------------------
def test_demo_gpt2_from_the_cache(tmp_path, monkeypatch):
    """``load_tokenizer("demo:gpt2")`` from Python: the cached rank file (sha256-checked) with name gpt2."""
    from rmlprep import demo

    src = REAL / "gpt2" / "gpt2.tiktoken"
    if not src.exists():
        pytest.skip(f"{src} is absent: run ../shared/real-tokenizers/get.sh")
    monkeypatch.setenv("RMLPREP_CACHE", str(tmp_path))
    shutil.copy(src, tmp_path / "gpt2.tiktoken")
    assert demo.fetch_gpt2_ranks() == tmp_path / "gpt2.tiktoken"  # no download: the cache is checked
    tok = load_tokenizer("demo:gpt2")
    assert tok.encode("Hello world") == [15496, 995]  # GPT-2's ids (tiktoken gpt2: "Hello", " world")
    assert load_tokenizer("demo:gpt2", add_eos=True).encode("Hello", add_special_tokens=True) == [15496, 50256]


def test_demo_offline_falls_back_to_the_committed_tokenizer(monkeypatch, capsys):
    from rmlprep import demo
    from rmlprep.load import open_tokenizer

    def offline(log=print):
        raise OSError("pip download failed: no network")

    monkeypatch.setattr(demo, "fetch_gpt2_ranks", offline)
    tok, f = open_tokenizer("demo:gpt2", log=print)
    assert f is not None and f.endswith(demo.FALLBACK)
    assert "no network" in capsys.readouterr().out
    assert load_tokenizer("demo:gpt2").fingerprint == tok.fingerprint
    with pytest.raises(LoaderError, match="demo:gpt3: unknown demo tokenizer; the demo tokenizers are: demo:gpt2"):
        load_tokenizer("demo:gpt3")


def test_open_tokenizer_words_its_errors_for_the_caller(tmp_path):
    """The config names tokenizer.path / tokenizer.name, the command line the path / --name; the
    Python-only tiktoken arguments (pattern=, special_tokens=) are offered from Python only."""
    from rmlprep.errors import ConfigError
    from rmlprep.load import CLI_WORDS, open_tokenizer

    ranks = tmp_path / "x.tiktoken"
    import base64

    # the 256 single bytes and nothing else: no known encoding has 256 ranks
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    with pytest.raises(LoaderError, match=r"pass name= \(one of .*\) or pattern= and special_tokens="):
        load_tokenizer(ranks)
    with pytest.raises(LoaderError, match=r"cannot tell which tiktoken encoding .*; set tokenizer.name to one of \[") as e:
        open_tokenizer(str(ranks))
    assert "pattern" not in str(e.value)
    with pytest.raises(LoaderError, match=r"unknown tiktoken encoding name 'foo'; set --name to one of \[") as e:
        open_tokenizer(str(ranks), name="foo", words=CLI_WORDS)
    assert "pattern" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^tokenizer.path: .*nope does not exist$"):
        open_tokenizer(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"^[^:]*nope: no such file or directory$"):
        open_tokenizer(str(tmp_path / "nope"), words=CLI_WORDS)
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    with pytest.raises(ConfigError, match=r"^tokenizer.name: only tiktoken rank files take an encoding name"):
        open_tokenizer(str(tmp_path / "tokenizer.json"), name="gpt2")


def test_chat_template_file_wins_over_the_config(tmp_path):
    """transformers (4.47 on) saves a model's chat template to chat_template.jinja and, loading
    the folder, takes it over tokenizer_config.json's chat_template: a re-saved model keeps an
    older template in the config. rmlprep reads the file too (the load cache keys it:
    test_cache.py)."""
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ 'old' }}"}))
    assert load_tokenizer(tmp_path).chat_template == "{{ 'old' }}"
    (tmp_path / "chat_template.jinja").write_text("{{ 'new' }}\n")
    assert load_tokenizer(tmp_path).chat_template == "{{ 'new' }}\n"
    (tmp_path / "chat_template.jinja").write_text("{{ 'newer' }}\n")
    assert load_tokenizer(tmp_path / "tokenizer.json").chat_template == "{{ 'newer' }}\n"
    (tmp_path / "chat_template.jinja").write_bytes(b"\xff")
    with pytest.raises(LoaderError, match=r"chat_template.jinja: cannot read the chat template"):
        load_tokenizer(tmp_path)


def test_special_tokens_map_names_the_special_tokens(tmp_path):
    """An explorer finding (G5): older Hub repos name bos/eos/unk only in
    ``special_tokens_map.json`` (no ``bos_token``/``eos_token`` in ``tokenizer_config.json``);
    transformers' ``from_pretrained`` reads that file after the config and its names win
    (``PreTrainedTokenizerBase._from_pretrained``, "begin legacy: ... update kwargs with
    special_tokens_map"). rmlprep never read it: eos_id was None and a pretraining run said
    "set pack.eos = false". Expected ids: the tokens' ids in the file's own vocab."""
    src = _need("hf/mistral-7b-v0.1/tokenizer.json")
    vocab = json.loads(src.read_text(encoding="utf-8"))["model"]["vocab"]
    shutil.copy(src, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True, "add_eos_token": False}))
    (tmp_path / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "unk_token": "<unk>"}))
    tok = load_tokenizer(tmp_path)
    assert (tok.spec.bos_id, tok.spec.eos_id) == (vocab["<s>"], vocab["</s>"])
    # both files name an eos: the map's wins, as in transformers
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<s>"}))
    assert load_tokenizer(tmp_path).spec.eos_id == vocab["</s>"]


def test_special_tokens_map_is_not_read_beside_added_tokens_decoder(tmp_path):
    """transformers reads ``special_tokens_map.json`` only when ``tokenizer_config.json`` has no
    ``added_tokens_decoder`` (``_from_pretrained``: the map is opened in the ``else`` branch of
    ``if "added_tokens_decoder" in init_kwargs``, 4.57.1 and 5.x); rmlprep put the map over
    every config, so a folder whose config was edited after saving (a fine-tune's eos
    ``<|im_end|>`` in the config, the base's ``<|endoftext|>`` left in the map) framed and
    terminated with the map's token, silently. Worked example (read_model_config's docstring):
    with ``added_tokens_decoder`` the config's names stand, on a tokenizer.json and on a
    SentencePiece .model folder; without it the map's win (the test above)."""
    src = _need("hf/qwen2.5/tokenizer.json")
    vocab = {t["content"]: t["id"] for t in json.loads(src.read_text(encoding="utf-8"))["added_tokens"]}
    shutil.copy(src, tmp_path / "tokenizer.json")
    decoder = {str(vocab[t]): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                               "normalized": False, "single_word": False} for t in ("<|endoftext|>", "<|im_end|>")}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "added_tokens_decoder": decoder}))
    (tmp_path / "special_tokens_map.json").write_text(json.dumps(
        {"eos_token": {"content": "<|endoftext|>"}, "pad_token": "<|im_end|>"}))
    tok = load_tokenizer(tmp_path)
    assert (tok.spec.eos_id, tok.spec.pad_id) == (vocab["<|im_end|>"], vocab["<|endoftext|>"])
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del cfg["added_tokens_decoder"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = load_tokenizer(tmp_path)
    assert (tok.spec.eos_id, tok.spec.pad_id) == (vocab["<|endoftext|>"], vocab["<|im_end|>"])

    spm_dir = tmp_path / "spm"
    spm_dir.mkdir()
    shutil.copy(_need("llama2/tokenizer.model"), spm_dir / "tokenizer.model")
    (spm_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "eos_token": "</s>",
         "added_tokens_decoder": {"2": {"content": "</s>", "special": True}}}))
    (spm_dir / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<unk>"}))
    assert load_tokenizer(spm_dir).spec.eos_id == 2  # llama2's </s>; the map's <unk> is id 0


def test_sentencepiece_folder_takes_its_config_special_tokens(tmp_path):
    """An explorer finding (G8): a folder with ``tokenizer.model`` and a ``tokenizer_config.json``
    (the slow-tokenizer layout of many Hub repos) had its chat template read but not its
    ``add_bos_token`` / ``pad_token``: with ``add_special_tokens`` no document got the BOS that
    transformers' LlamaTokenizer adds when the config says ``add_bos_token: true``. Expected:
    sentencepiece's own ids with its bos id in front; a .model given alone keeps sentencepiece's
    defaults (no bos)."""
    spm = pytest.importorskip("sentencepiece")
    src = _need("llama2/tokenizer.model")
    ref = spm.SentencePieceProcessor(model_file=str(src))
    shutil.copy(src, tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>",
         "tokenizer_class": "LlamaTokenizer"}))
    text = "Hello world"
    tok = load_tokenizer(tmp_path)
    assert tok.encode(text, add_special_tokens=True) == [ref.bos_id(), *ref.encode(text)]
    assert tok.spec.pad_id == ref.piece_to_id("<unk>")
    assert load_tokenizer(src).encode(text, add_special_tokens=True) == ref.encode(text)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<nope>"}))
    with pytest.raises(LoaderError, match="eos_token = '<nope>' is not a piece of tokenizer.model"):
        load_tokenizer(tmp_path)


_BOS_DEFAULTS = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "bos_defaults.json")
                           .read_text(encoding="utf-8"))


@pytest.mark.parametrize("cls", sorted(_BOS_DEFAULTS["classes"]))
def test_sentencepiece_folder_silent_config_follows_transformers_or_refuses(tmp_path, cls):
    """A folder with ``tokenizer.model`` and a ``tokenizer_config.json`` naming its
    ``tokenizer_class`` but not ``add_bos_token`` / ``add_eos_token``: transformers adds what
    the class defaults to (not sentencepiece's nothing). Expected: the ids both transformers
    4.57.1 and 5.24.0 put around the text (``fixtures/bos_defaults.json``, by
    ``tools/make_bos_defaults_fixtures.py``) around sentencepiece's own ids; where the two
    disagree (Llama, Gemma: 4.x adds the BOS, 5.x not), adding special tokens is refused naming
    the key to set, while encoding without them gives sentencepiece's ids."""
    spm = pytest.importorskip("sentencepiece")
    src = _need(_BOS_DEFAULTS["source"])
    text = _BOS_DEFAULTS["text"]
    model = tmp_path / ("spiece.model" if cls.startswith("T5") else "tokenizer.model")
    shutil.copy(src, model)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": cls}))
    refs = list(_BOS_DEFAULTS["classes"][cls].values())
    assert all("error" not in r for r in refs)
    bare = spm.SentencePieceProcessor(model_file=str(src)).encode(text)
    if all((r["prefix"], r["suffix"]) == (refs[0]["prefix"], refs[0]["suffix"]) for r in refs):
        assert load_tokenizer(model).encode(text, add_special_tokens=True) == refs[0]["prefix"] + bare + refs[0]["suffix"]
    else:
        key = "add_bos_token" if any(r["prefix"] != refs[0]["prefix"] for r in refs) else "add_eos_token"
        tok = load_tokenizer(model)
        assert tok.encode(text, parse_special=False) == bare
        match = rf'^add_special_tokens: {key}: .*disagree on {cls}.*set "{key}": true or false there'
        with pytest.raises(LoaderError, match=match):
            tok.encode(text, add_special_tokens=True)
        for n in (1, 2):  # the batch paths (native flat rows; the pure loop) refuse alike
            with pytest.raises(LoaderError, match=match):
                tok.encode_batch([text], add_special_tokens=True, num_threads=n)
        with pytest.raises(LoaderError, match=match):
            tok.encode_fragments([text], add_special_tokens=True)
        # tokenize_text (add_special_tokens=True by default) said it on every row (a RowError, or
        # with on_error="record" a dataset whose every row was an error): at construction now
        from rmlprep import tokenize_text
        from rmlprep.errors import ConfigError

        with pytest.raises(ConfigError, match=r"^tokenize_text: " + match[1:]):
            tokenize_text(tok, on_error="record")
        assert tokenize_text(tok, add_special_tokens=False)({"text": [text]})["input_ids"][0].tolist() == bare
        field = key.removesuffix("_token")
        # the caller settles it: either reference's framing, with the flag given (the count of
        # added ids only: Gemma's default bos_token "<bos>" is no piece of this Llama model)
        for r in refs:
            want = bool(r["prefix"] if field == "add_bos" else r["suffix"])
            ids = load_tokenizer(model, **{field: want}).encode(text, add_special_tokens=True)
            assert (len(ids), ids[len(r["prefix"]):len(ids) - len(r["suffix"])]) == \
                (len(r["prefix"]) + len(bare) + len(r["suffix"]), bare)


def _bos_generator():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    try:
        from tools import make_bos_defaults_fixtures
    finally:
        sys.path.pop(0)
    return make_bos_defaults_fixtures


def test_bos_defaults_fixture_is_its_generators():
    """The fixture's banner and inputs are the generator's (no transformers needed): its name,
    source model and sha256 (when the real file is here), text and classes, one answer per
    class from each reference, and every class rmlprep's table (SPM_CLASS_DEFAULTS) names is
    one the fixture answers for. An edit of the generator's inputs without a regeneration
    fails here."""
    import hashlib

    from rmlprep.load import SPM_CLASS_DEFAULTS

    gen = _bos_generator()
    fx = _BOS_DEFAULTS
    assert (fx["generator"], fx["source"], fx["text"]) == ("tools/make_bos_defaults_fixtures.py", gen.SOURCE, gen.TEXT)
    assert list(fx["classes"]) == list(gen.CLASSES)
    assert [r.split(" ")[:2] for r in fx["references"]] == [["transformers", "4.57.1"], ["transformers", "5.24.0"]]
    assert all(list(v) == fx["references"] for v in fx["classes"].values())
    assert set(SPM_CLASS_DEFAULTS) <= set(fx["classes"])
    model = gen.real_dir() / gen.SOURCE
    if model.is_file():
        assert hashlib.sha256(model.read_bytes()).hexdigest() == fx["sha256"]


def test_bos_defaults_check_mode_names_what_drifted():
    """The generator's ``--check`` (the fixture's drift check, run by hand with the two
    transformers installs: not here, where neither is) compares by :func:`drift`: the committed
    fixture against itself is unchanged; a regeneration where one class's answer or a banner
    key differs is reported, one line each, naming the class or key."""
    import copy

    gen = _bos_generator()
    fx = _BOS_DEFAULTS
    assert gen.drift(fx, copy.deepcopy(fx)) == []
    moved = copy.deepcopy(fx)
    ref = fx["references"][1]
    moved["classes"]["LlamaTokenizerFast"][ref]["prefix"] = [1]
    moved["references"][1] = "transformers 5.25.0 (tokenizers 0.23.0)"
    moved["classes"]["NewTokenizer"] = {}
    lines = gen.drift(fx, moved)
    assert [ln.split(":")[0] for ln in lines] == ["references", "classes['LlamaTokenizerFast']",
                                                  "classes['NewTokenizer']"]


def test_sentencepiece_folder_unknown_class_and_silent_config_is_refused(tmp_path):
    """An unknown (or absent) ``tokenizer_class`` and no ``add_bos_token``: transformers' default
    depends on the class (fixtures/bos_defaults.json shows BOS, EOS and neither), so rmlprep
    refuses to add special tokens rather than guess (the load and plain encoding work); the
    config's key, or load_tokenizer's override, settles it, also when the first load without
    the override was cached. ``LLaMATokenizer`` is the misspelt class of early converted Llama repos."""
    shutil.copy(_need("llama2/tokenizer.model"), tmp_path / "tokenizer.model")
    for cfg, word in (({"tokenizer_class": "LLaMATokenizer"}, "does not know the default of tokenizer_class "
                                                               "'LLaMATokenizer'"),
                      ({"bos_token": "<s>"}, "names no tokenizer_class")):
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
        tok = load_tokenizer(tmp_path)
        assert tok.encode("a") == [263] and tok.spec.add_bos is False  # sentencepiece's "▁a"
        with pytest.raises(LoaderError, match=rf'add_bos_token: tokenizer_config.json does not set it .*{word}'
                                              r'.*\(or pass add_bos= to load_tokenizer\); add_eos_token: '):
            tok.encode("a", add_special_tokens=True)
        with pytest.raises(LoaderError, match=r'^add_special_tokens: add_eos_token: ((?!add_bos_token).)*$'):
            load_tokenizer(tmp_path, add_bos=True).encode("a", add_special_tokens=True)
        assert load_tokenizer(tmp_path, add_bos=True, add_eos=False).encode("a", add_special_tokens=True)[0] == 1
        # an explicit unset_specials= is the caller's (it was replaced by the cached spec's, filtered)
        for _ in (1, 2):  # a cache miss, then a hit
            assert load_tokenizer(tmp_path, unset_specials=()).encode("a", add_special_tokens=True) == [263]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": False, "add_eos_token": False}))
    assert load_tokenizer(tmp_path).spec.add_bos is False


def test_a_run_over_a_folder_that_leaves_add_bos_open_frames_with_pack_or_refuses(tmp_path):
    """A Llama ``tokenizer.model`` folder whose config names its class but not ``add_bos_token``
    (transformers 4.x adds the BOS, 5.x not) had stopped every run at load, also runs that frame
    documents with ``pack.bos``/``pack.eos`` and never read the flag (the run default
    ``tokenizer.add_special_tokens = false``). Such a run is planned; one that asks the tokenizer
    for its special tokens is refused at plan time naming the key (exit 2 in the CLI)."""
    from rmlprep.config import config_from_dict
    from rmlprep.errors import ConfigError
    from rmlprep.pipeline.framing import framing

    shutil.copy(_need("llama2/tokenizer.model"), tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer"}))
    tok = load_tokenizer(tmp_path)

    def cfg(add):
        return config_from_dict({"input": {"paths": [str(tmp_path / "in.jsonl")]},
                                 "tokenizer": {"path": str(tmp_path), "add_special_tokens": add},
                                 "pack": {"seq_len": 64, "bos": not add, "eos": not add},
                                 "output": {"dir": str(tmp_path / "out")}})

    f = framing(cfg(False), tok)
    assert (f.bos, f.eos) == (1, 2)  # the model's <s> and </s>
    with pytest.raises(ConfigError, match=r'^tokenizer\.add_special_tokens: add_bos_token: .*disagree on LlamaTokenizer'):
        framing(cfg(True), tok)


def test_tiktoken_arguments_with_a_sentencepiece_model_are_named(tmp_path):
    """name= (a run's tokenizer.name left from a GPT-2 config) with a SentencePiece .model gets
    the same line as with a tokenizer.json or GGUF; the .model was parsed as a rank file and
    refused as 'line 2: expected '<base64 token> <rank>', got b'\\x0e'', which reads as a corrupt file."""
    p = tmp_path / "tokenizer.model"
    p.write_bytes(b"\x0a\x09\x0a\x05<unk>\x15\x00\x00\x00\x00\x18\x02")  # a ModelProto's first piece: <unk>, unknown
    with pytest.raises(LoaderError, match="only apply to tiktoken rank files"):
        load_tokenizer(p, name="gpt2")
    with pytest.raises(LoaderError, match="only apply to tiktoken rank files"):
        load_tokenizer(_need("llama2/tokenizer.model"), name="gpt2")


def test_a_sentencepiece_folder_whose_config_drops_the_prefix_space_is_refused(tmp_path):
    """A Llama ``tokenizer.model`` folder whose config says ``"add_prefix_space": false``:
    transformers 4.57.1 and 5.24.0 (LlamaTokenizer, legacy) then write no dummy prefix, so
    ``"Hello world"`` is ``[10994 'Hello', 3186]``, where sentencepiece (and rmlprep, which read
    the key nowhere) give ``[15043 '▁Hello', 3186]``: every text's first word otherwise. Refused,
    naming the key; ``true`` or no key loads as before."""
    shutil.copy(_need("llama2/tokenizer.model"), tmp_path / "tokenizer.model")
    base = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "legacy": True}
    cfg = tmp_path / "tokenizer_config.json"
    for value in (None, True):
        cfg.write_text(json.dumps({**base, **({} if value is None else {"add_prefix_space": value})}))
        assert load_tokenizer(tmp_path).encode("Hello world") == [15043, 3186]
    cfg.write_text(json.dumps({**base, "add_prefix_space": False}))
    with pytest.raises(LoaderError, match=rf"^{tmp_path}: tokenizer_config.json sets add_prefix_space = false, so "
                                          r"transformers writes no '\u2581' before a text"):
        load_tokenizer(tmp_path)


def test_a_tiktoken_folder_takes_the_configs_bos_eos_and_template(tmp_path):
    """A folder holding a tiktoken rank file as ``tokenizer.model`` and a ``tokenizer_config.json``
    (Llama 3's ``original/``, Kimi K2): transformers 4.57.1 and 5.24.0 load it through their
    tiktoken converter with the config's special tokens and chat template (with ``"eos_token":
    "<|eot_id|>"`` their ``eos_token_id`` is 128009; ``tok("x")`` is ``[87]``, nothing added).
    rmlprep read the rank file alone: eos 128001 (``<|end_of_text|>``), so ``pack.eos`` closed
    every document with another token than the folder names, and no template."""
    shutil.copy(_need("llama3/llama3.tiktoken"), tmp_path / "tokenizer.model")
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                               "chat_template": "{{ messages }}"}))
    tok = load_tokenizer(tmp_path)
    assert (tok.bos_id, tok.eos_id, tok.chat_template) == (128000, 128009, "{{ messages }}")
    assert tok.encode("x", add_special_tokens=True) == [87]
    cfg.write_text(json.dumps({"eos_token": "<|im_end|>"}))
    with pytest.raises(LoaderError, match=r"tokenizer_config.json: eos_token = '<\|im_end\|>' is not a token of "
                                          r"tokenizer.model \(llama3\); the two files are from different models"):
        load_tokenizer(tmp_path)


def test_config_strip_flags_must_match_the_tokenizer_json(tmp_path):
    """A config whose ``added_tokens_decoder`` gives a token other ``lstrip`` / ``rstrip`` /
    ``single_word`` than the tokenizer.json loaded, with the tokenizer.json's flags. transformers
    4.57.1 re-adds such an entry and its flags win; 5.24.0 keeps the tokenizer.json's. Worked
    example on Qwen2.5 with ``"rstrip": true`` on ``<|im_end|>`` (151645): ``"a<|im_end|>  b"``
    is ``[64, 151645, 65]`` in 4.57.1 and ``[64, 151645, 220, 293]`` in 5.24.0 (and rmlprep);
    ``"lstrip": true``: ``"a  <|im_end|>b"`` is ``[64, 151645, 65]`` vs ``[64, 256, 151645, 65]``.
    No ids are both versions', so the load is refused naming the id, the flag and both values."""
    src = _need("hf/qwen2.5/tokenizer.json")
    shutil.copy(src, tmp_path / "tokenizer.json")
    cfg = json.loads((src.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert load_tokenizer(src.parent).encode("a<|im_end|>  b") == [64, 151645, 220, 293]  # as shipped: agree
    for flag in ("rstrip", "lstrip", "single_word"):
        edited = json.loads(json.dumps(cfg))
        edited["added_tokens_decoder"]["151645"][flag] = True
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(edited))
        with pytest.raises(LoaderError, match=rf"^{tmp_path}: tokenizer_config.json added_tokens_decoder gives id "
                           rf"151645 '<\|im_end\|>' {flag} = true, tokenizer.json false: transformers 4.57.1 takes"):
            load_tokenizer(tmp_path)


def test_config_added_tokens_decoder_must_match_the_tokenizer_json(tmp_path):
    """A careless-user finding: a folder with one model's tokenizer.json and another's
    tokenizer_config.json loaded when their bos/eos matched, though transformers would add the
    config's ``added_tokens_decoder`` entries the tokenizer.json lacks (encoding them as one id
    each, where rmlprep split them into text). Worked example: the tiny vocab gives ``<s>`` id 3
    and ``ab`` id 2; a config giving id 3 as ``</s>``, or naming id 4, is refused; one naming id
    2 ``ab`` (a model-vocab id, as real configs list ``<|endoftext|>``) and id 3 ``<s>`` with
    another ``special`` flag agrees (transformers 4.57.1 and 5.24.0 give the same ids then); one
    with another ``lstrip`` is refused (test_config_strip_flags_must_match_the_tokenizer_json)."""
    (tmp_path / "tokenizer.json").write_text(json.dumps(_tiny_json()))
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"added_tokens_decoder": {
        "2": {"content": "ab", "special": False}, "3": {"content": "<s>", "special": False, "lstrip": False}}}))
    assert load_tokenizer(tmp_path).encode("<s>ab") == [3, 2]
    cfg.write_text(json.dumps({"added_tokens_decoder": {"3": {"content": "<s>", "special": True, "lstrip": True}}}))
    with pytest.raises(LoaderError, match=rf"^{tmp_path}: tokenizer_config.json added_tokens_decoder gives id 3 '<s>' "
                       r"lstrip = true, tokenizer.json false: transformers 4.57.1 takes the config's flags"):
        load_tokenizer(tmp_path)
    cfg.write_text(json.dumps({"added_tokens_decoder": {"3": {"content": "</s>", "special": True}}}))
    with pytest.raises(LoaderError, match=rf"^{tmp_path}: tokenizer_config.json added_tokens_decoder gives id 3 "
                       r"'</s>', but tokenizer.json has '<s>' there; the two files are from different models"):
        load_tokenizer(tmp_path)
    cfg.write_text(json.dumps({"added_tokens_decoder": {"5": {"content": "<x>"}, "4": {"content": "</s>"}}}))
    with pytest.raises(LoaderError, match=r"gives id 4 '</s>', but tokenizer.json has no such id \(and 1 more ids\)"):
        load_tokenizer(tmp_path)
    cfg.write_text(json.dumps({"added_tokens_decoder": {"x": {"content": "<s>"}}}))
    with pytest.raises(LoaderError, match=r"added_tokens_decoder entry 'x' is not an id"):
        load_tokenizer(tmp_path)


def test_mixed_model_folder_is_refused(tmp_path):
    """The finding's folder: Qwen2.5's tokenizer.json with Qwen3's tokenizer_config.json (same
    bos/eos) was taken as 'qwen3' and encoded ``<think>`` as text; Qwen3's config declares ids
    151665-151668 (``<tool_response>`` ... ``</think>``), which Qwen2.5's file (151665 ids) lacks.
    Every real folder with both files still loads (each config's entries are its tokenizer.json's
    ids and contents): tests/test_hf.py loads each of them with its config."""
    shutil.copy(_need("hf/qwen2.5/tokenizer.json"), tmp_path / "tokenizer.json")
    shutil.copy(_need("hf/qwen3/tokenizer_config.json"), tmp_path / "tokenizer_config.json")
    with pytest.raises(LoaderError, match=r"gives id 151665 '<tool_response>', but tokenizer.json has no such id "
                       r"\(and 3 more ids\)"):
        load_tokenizer(tmp_path)


def test_config_added_tokens_decoder_must_match_a_sentencepiece_model(tmp_path):
    """The check above (35fb4ff) covered tokenizer.json folders only: a tokenizer.model beside
    another model's tokenizer_config.json loaded if its bos/eos were pieces, and a config adding
    tokens beyond the model (a fine-tune's ``<|im_start|>`` at 32000, which transformers adds
    from the config) loaded without them, their text split into pieces. Worked example (Llama 2's
    .model: 0 ``<unk>``, 1 ``<s>``, 2 ``</s>``, 32,000 pieces): Llama-2-7b-hf's own entries load;
    id 2 as ``<s>`` is refused as another model's config; id 32000 in a config without ``legacy``
    is refused naming that key (tokens past the pieces are read since: tests/test_spm_added.py)."""
    d = tmp_path / "spm"
    d.mkdir()
    shutil.copy(_need("llama2/tokenizer.model"), d / "tokenizer.model")
    cfg = d / "tokenizer_config.json"

    def write(decoder):
        cfg.write_text(json.dumps({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
                                   "added_tokens_decoder": {k: {"content": v, "special": True}
                                                            for k, v in decoder.items()}}))

    write({"0": "<unk>", "1": "<s>", "2": "</s>"})  # Llama-2-7b-hf's tokenizer_config.json
    assert load_tokenizer(d).encode("Hi", add_special_tokens=True)[0] == 1
    write({"0": "<unk>", "1": "</s>", "2": "<s>"})
    with pytest.raises(LoaderError, match=rf"^{d}: tokenizer_config.json added_tokens_decoder gives id 1 '</s>', but "
                       r"tokenizer.model has '<s>' there \(and 1 more ids\); the two files are from different models"):
        load_tokenizer(d)
    write({"2": "</s>", "32000": "<|im_end|>", "32001": "<|im_start|>"})
    with pytest.raises(LoaderError, match=rf"^{d}: tokenizer_config.json added_tokens_decoder adds id 32000 "
                       r"'<\|im_end\|>' past the 32000 pieces of tokenizer.model, and the config has no \"legacy\" "
                       r"key: .*or load the tokenizer.json of the model$"):
        load_tokenizer(d)


def test_split_special_tokens_in_the_config_is_encodes_default(tmp_path):
    """A fresh-user finding: ``"split_special_tokens": true`` in tokenizer_config.json was not
    read, so ``encode`` cut special-token text out as its id where transformers (4.57.1 and
    5.24.0, ``tokenizer(text)`` and ``encode``) reads it as text; the key is now the default of
    ``parse_special`` (None) in each encode method, and an explicit flag still wins, as
    transformers' ``split_special_tokens=`` argument does. Expected ids: tokenizers 0.23.3's
    ``encode_special_tokens = True`` (what transformers sets) on the same file; worked on the
    tiny file: ``"ab<s><x>"`` with ``<s>`` (6) read as text is ``ab`` (2) then ``<``, ``s``, ``>``
    as byte-level bytes, each its own id (``<`` 3, ``s`` 4, ``>`` 5), and ``<x>`` (not special)
    stays id 7: ``[2, 3, 4, 5, 7]``; parsed, ``[2, 6, 7]``."""
    import pickle

    from tokenizers import Tokenizer as HFTokenizer

    d = _tiny_json()
    d["model"]["vocab"].update({"<": 3, "s": 4, ">": 5})
    d["added_tokens"] = [{"id": 6, "content": "<s>", "special": True}, {"id": 7, "content": "<x>", "special": False}]
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    d["added_tokens"] = [{**flags, **t} for t in d["added_tokens"]]
    d["pre_tokenizer"]["trim_offsets"] = True  # tokenizers needs the key; rmlprep ignores it (offsets only)
    d["decoder"] = {**d["decoder"], "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    (tmp_path / "tokenizer.json").write_text(json.dumps(d))
    ref = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ref.encode_special_tokens = True
    want = ref.encode("ab<s><x>", add_special_tokens=False).ids
    assert want == [2, 3, 4, 5, 7]
    assert load_tokenizer(tmp_path).encode("ab<s><x>") == [2, 6, 7]  # no key: parsed, as before
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"split_special_tokens": True}))
    for tok in (load_tokenizer(tmp_path), pickle.loads(pickle.dumps(load_tokenizer(tmp_path / "tokenizer.json")))):
        assert tok.split_special_tokens is True
        assert tok.encode("ab<s><x>") == want
        assert tok.encode_batch(["ab<s><x>"]) == [want] == tok.encode_batch(["ab<s><x>"], num_threads=2)
        assert tok.encode_batch_flat(["ab<s><x>"])[0].tolist() == want == tok.encode_to_numpy("ab<s><x>").tolist()
        assert tok.encode("ab<s><x>", parse_special=True) == [2, 6, 7]  # an explicit flag wins
    out = subprocess.run([sys.executable, "-m", "rmlprep", "encode", str(tmp_path), "ab<s><x>"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == [str(i) for i in want]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"split_special_tokens": "false"}))
    with pytest.raises(LoaderError, match="split_special_tokens = 'false': give true or false"):
        load_tokenizer(tmp_path)


def test_split_special_tokens_on_qwen25_gives_transformers_ids(tmp_path):
    """Worked example (read_model_config's neighbour, folder_config.split_special_tokens):
    transformers 4.57.1 and 5.24.0 on Qwen2.5's folder with ``"split_special_tokens": true``
    give ``tok("a<|im_end|>b")["input_ids"] == [64, 27, 91, 318, 6213, 91, 29, 65]`` and
    ``tok("x<tool_call>y")["input_ids"] == [87, 151657, 88]`` (``<tool_call>`` is not special).
    ``tokenize_text``, which never parses by default (corpus text is data), gives the same ids
    there, and ``parse_special=True`` parses, as ``split_special_tokens=False``:
    ``[64, 151645, 65]`` (``<|im_end|>`` is 151645). Qwen2.5 adds no bos/eos."""
    src = _need("hf/qwen2.5")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / f, tmp_path / f)
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**cfg, "split_special_tokens": True}))
    tok = load_tokenizer(tmp_path)
    assert tok.encode("a<|im_end|>b") == [64, 27, 91, 318, 6213, 91, 29, 65]
    assert tok.encode("x<tool_call>y") == [87, 151657, 88]
    import pyarrow as pa

    from rmlprep import tokenize_text

    batch = pa.RecordBatch.from_arrays([pa.array(["a<|im_end|>b", "x<tool_call>y"])], names=["text"])
    assert tokenize_text(tok)(batch).column("input_ids").to_pylist() == [[64, 27, 91, 318, 6213, 91, 29, 65],
                                                                          [87, 151657, 88]]
    assert tokenize_text(tok, parse_special=True)(batch).column("input_ids").to_pylist()[0] == [64, 151645, 65]


def test_a_missing_hub_id_says_rmlprep_does_not_download(tmp_path, monkeypatch):
    """A fresh-user finding: ``load_tokenizer("Qwen/Qwen2.5-7B")`` (transformers'
    ``from_pretrained`` habit) said only "no such file or directory". A missing path that reads
    as a Hub model id now says rmlprep does not download and gives the ``hf download`` line
    (huggingface_hub's CLI: ``--include`` globs, ``--local-dir``); the CLI and a run config,
    which make the path absolute from the current directory, say it too. A path with a file
    suffix or under an existing local folder is a local path: no hint."""
    from rmlprep.errors import ConfigError
    from rmlprep.load import CLI_WORDS, open_tokenizer

    monkeypatch.chdir(tmp_path)
    hint = r"does not download from the Hugging Face Hub.*`hf download Qwen/Qwen2\.5-7B --include 'tokenizer\*'"
    with pytest.raises(LoaderError, match=r"^Qwen/Qwen2\.5-7B: no such file or directory; rmlprep reads local " + ".*" + hint):
        load_tokenizer("Qwen/Qwen2.5-7B")
    with pytest.raises(ConfigError, match=r"tokenizer\.path: .* does not exist; .*" + hint + r".*--local-dir Qwen2\.5-7B"):
        open_tokenizer(str(tmp_path / "Qwen" / "Qwen2.5-7B"))
    with pytest.raises(ConfigError, match=hint):
        open_tokenizer(str(tmp_path / "Qwen" / "Qwen2.5-7B"), words=CLI_WORDS)
    (tmp_path / "models").mkdir()
    for local in ("models/llama3", "tok/tokenizer.json", "nope", str(tmp_path / "models" / "llama3")):
        with pytest.raises(LoaderError, match=r"no such file or directory$"):
            load_tokenizer(local)
