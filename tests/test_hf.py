"""tokenizer.json loading (rmlprep.hf): real files vs committed fixtures, refusals, parity.

The fixtures (fixtures/parity/hf-*.json) hold Hugging Face ``tokenizers`` ids for a fixed
sample; ``tools/make_parity_fixtures.py`` writes them. Tests marked ``parity`` run the
reference library live on more than 2,000 real documents.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from rmlprep import LoaderError, UnsupportedTokenizer
from rmlprep.errors import TokenizeError
from rmlprep.hf import spec_from_tokenizer_json
from rmlprep.load import load_tokenizer
from rmlprep.pretokenize import O200K_PATTERN
from rmlprep.spec import BYTE_LEVEL, SENTENCEPIECE, TokenType
from rmlprep.tokenizer import Tokenizer
from tools.make_parity_fixtures import HARD_STRINGS, corpus_texts, real_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "parity"
REAL = real_dir()
HF_NAMES = ["gpt2", "llama3", "qwen2.5", "mistral-7b-v0.1", "gemma", "phi-3-mini", "gemma3", "gpt-4o", "gpt-oss", "qwen3"]
SHARED_PHI3 = ROOT.parent / "shared" / "real-tokenizers" / "phi-3-mini"

_loaded: dict[str, Tokenizer] = {}


def _real(name: str) -> Tokenizer:
    path = REAL / "hf" / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} is absent: run ../shared/real-tokenizers/get.sh "
                    "(or set RMLPREP_REAL_TOKENIZERS)")
    if name not in _loaded:
        _loaded[name] = load_tokenizer(path.parent)
    return _loaded[name]


def _first_mismatch(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


# -- real files vs committed fixtures (no reference library needed) --------------------------
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in HF_NAMES])
def test_real_tokenizer_matches_fixture(name):
    fx = json.loads((FIXTURES / f"hf-{name}.json").read_text(encoding="utf-8"))
    tok = _real(name)
    src = REAL / fx["source"]
    assert hashlib.sha256(src.read_bytes()).hexdigest() == fx["sha256"], (
        f"{src} differs from the file the fixture was made from; rerun tools/make_parity_fixtures.py"
    )
    bad = []
    for case in fx["cases"]:
        ids = tok.encode(case["text"], add_special_tokens=case["add_special_tokens"],
                         parse_special=case.get("parse_special", True))
        if ids != case["ids"]:
            bad.append((case["text"][:80], case["add_special_tokens"], case.get("parse_special", True),
                        _first_mismatch(ids, case["ids"])))
        if "decode" in case:
            assert tok.decode(case["ids"]) == case["decode"], case["text"][:80]
    assert not bad, f"{len(bad)} of {len(fx['cases'])} cases differ from {fx['reference']}; first: {bad[:3]}"


def test_fixture_files_are_small():
    for p in FIXTURES.glob("*.json"):
        assert p.stat().st_size < 1_500_000, p


def test_fixtures_hold_every_debian_part():
    """When made with the Debian-built corpus, every part is in the sample, with its name."""
    for p in sorted(FIXTURES.glob("*.json")):
        fx = json.loads(p.read_text(encoding="utf-8"))
        banner = fx["debian_corpus"]
        if banner is None:
            pytest.skip(f"{p.name} was made without the Debian-built corpus")
        counted: dict[str, int] = {}
        for c in fx["cases"]:
            if "part" in c:
                counted[c["part"]] = counted.get(c["part"], 0) + 1
        assert counted == banner["parts"] and len(counted) >= 9 and min(counted.values()) >= 20, p.name


@pytest.mark.parity
def test_parity_fixtures_do_not_drift(tmp_path):
    """Rerunning tools/make_parity_fixtures.py gives the committed fixtures byte for byte
    (one tokenizer.json and one tiktoken file, to stay fast). The sample holds Debian-built
    corpus windows, so the same corpus (same MANIFEST.tsv sha256) must be present."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("tiktoken")
    from tools.make_parity_fixtures import corpus_mismatch, main

    names = ["hf-gpt2", "tiktoken-llama3"]
    fxs = {n: json.loads((FIXTURES / f"{n}.json").read_text(encoding="utf-8")) for n in names}
    for fx in fxs.values():
        if not (REAL / fx["source"]).is_file():
            pytest.skip(f"{REAL / fx['source']} is absent")
    banner = fxs["hf-gpt2"]["debian_corpus"]
    if why := corpus_mismatch(banner):
        pytest.skip(why)
    assert main(["--out", str(tmp_path), "--only", *names]) == 0
    for n in names:
        assert (tmp_path / f"{n}.json").read_bytes() == (FIXTURES / f"{n}.json").read_bytes(), n


@pytest.mark.parametrize(
    "name, kind, vocab_size, bos, eos, add_bos, eot",
    [
        pytest.param("gpt2", BYTE_LEVEL, 50257, 50256, 50256, False, [50256], id="gpt2"),
        pytest.param("llama3", BYTE_LEVEL, 128256, 128000, 128001, False, [128009], id="llama3"),
        pytest.param("qwen2.5", BYTE_LEVEL, 151665, None, 151645, False, [151645], id="qwen2.5"),
        pytest.param("mistral-7b-v0.1", SENTENCEPIECE, 32000, 1, 2, True, [], id="mistral"),
        pytest.param("gemma", SENTENCEPIECE, 256000, 2, 1, True, [107], id="gemma"),
        pytest.param("phi-3-mini", SENTENCEPIECE, 32011, 1, 32000, False, [32000, 32007], id="phi-3-mini"),
        pytest.param("gemma3", SENTENCEPIECE, 262145, 2, 106, True, [106], id="gemma3"),
        pytest.param("gpt-4o", BYTE_LEVEL, 200019, 199999, 199999, False, [199999], id="gpt-4o"),
        pytest.param("gpt-oss", BYTE_LEVEL, 200019, 199998, 200002, False, [200007], id="gpt-oss"),
        pytest.param("qwen3", BYTE_LEVEL, 151669, None, 151645, False, [151645], id="qwen3"),
    ],
)
def test_real_tokenizer_metadata(name, kind, vocab_size, bos, eos, add_bos, eot):
    tok = _real(name)
    s = tok.spec
    assert (s.kind, tok.vocab_size, s.bos_id, s.eos_id, s.add_bos, list(s.eot_ids)) == (
        kind, vocab_size, bos, eos, add_bos, eot)
    r = repr(tok)
    assert f"vocab_size={vocab_size}" in r and kind in r


def test_llama3_settings_and_chat_template():
    tok = _real("llama3")
    assert tok.spec.ignore_merges and tok.spec.pre_split and tok.chat_template
    assert "pre_split=['llama3']" in repr(tok)


def test_legacy_sentencepiece_form_maps_to_always_prefix():
    s = _real("mistral-7b-v0.1").spec
    assert (s.add_prefix_space, s.prefix_scheme, s.prefix_if_missing) == (True, "always", False)
    assert s.decode_chain == (("Replace", "\u2581", " "), ("ByteFallback",), ("Fuse",), ("Strip", " ", 1, 0))
    assert s.byte_fallback and s.fuse_unk and s.unk_id == 0
    assert s.token_types[3] == TokenType.BYTE  # <0x00>


def test_gpt4o_removed_invert_split_runs_as_isolated_o200k():
    """GPT-4o's Split(o200k, Removed, invert=true) keeps exactly the o200k matches, which tile
    every text: the spec says plain o200k (tests/test_split.py proves the equivalence)."""
    s = _real("gpt-4o").spec
    assert s.pre_split == (O200K_PATTERN,) and s.pre_split_behaviors == ()
    assert [i for i, t in enumerate(s.token_types) if t == TokenType.UNUSED] == [199998, *range(200000, 200018)]


def test_gemma3_split_on_space_is_dropped_after_replace():
    """Gemma 3: Replace(" ", "▁") then Split(" ", MergedWithPrevious). The normalized text holds
    no " ", so the Split never matches: the spec is Gemma's, which runs natively."""
    s = _real("gemma3").spec
    assert s.pre_split == () and s.kind == SENTENCEPIECE and not s.add_prefix_space
    gemma = _real("gemma").spec
    assert (s.byte_fallback, s.fuse_unk, s.split_on_space) == (gemma.byte_fallback, gemma.fuse_unk, False)


_SPACEY = st.lists(st.sampled_from([" ", "  ", "a", "b", "é", "\n", "\t", "\u2581", "x y", "<b>", "1", "<think>",
                                     "<end_of_turn>", "\n\n\n", "<|endoftext|>"]), max_size=20).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=_SPACEY | st.text(st.characters(codec="utf-8"), max_size=30))
def test_gemma3_kept_split_equals_dropped_split(text):
    """Proof of the drop on random text: the same spec with the Split kept (pure path, Split
    run on the normalized text) gives the ids of the loaded one (native path)."""
    tok = _real("gemma3")
    kept = _gemma3_split_kept()
    assert kept._native is None
    for asp in (False, True):
        assert tok.encode(text, add_special_tokens=asp) == kept.encode(text, add_special_tokens=asp)


_KEPT: list = []


def _gemma3_split_kept() -> Tokenizer:
    """Gemma 3 with its Split(" ", MergedWithPrevious) kept in the spec (built once)."""
    if not _KEPT:
        spec = _real("gemma3").spec
        _KEPT.append(Tokenizer.create(spec.replace(pre_split=(" ",),
                                                   pre_split_behaviors=(("merged_with_previous", False),))))
    return _KEPT[0]


@pytest.mark.parity
@pytest.mark.parametrize("name", ["gemma3", "gpt-4o", "qwen3"])
@settings(max_examples=150, deadline=None)
@given(text=_SPACEY | st.text(st.characters(codec="utf-8"), max_size=30))
def test_live_random_text(name, text):
    """Random text (any code point) against the reference, both add_special_tokens values and
    both ways of reading special-token text."""
    tok = _real(name)
    ref, plain = _reference(name)
    for asp in (False, True):
        assert tok.encode(text, add_special_tokens=asp) == ref.encode(text, add_special_tokens=asp).ids
        assert tok.encode(text, add_special_tokens=asp, parse_special=False) == \
            plain.encode(text, add_special_tokens=asp).ids


_REFS: dict = {}


def _reference(name: str):
    """(tokenizers.Tokenizer, the same with encode_special_tokens=True) for a real file."""
    tokenizers = pytest.importorskip("tokenizers")
    if name not in _REFS:
        path = str(REAL / "hf" / name / "tokenizer.json")
        ref, plain = tokenizers.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
        plain.encode_special_tokens = True
        _REFS[name] = (ref, plain)
    return _REFS[name]


def test_gemma_has_no_prefix_and_no_strip():
    s = _real("gemma").spec
    assert not s.add_prefix_space
    assert s.decode_chain == (("Replace", "\u2581", " "), ("ByteFallback",), ("Fuse",))


def test_phi3_added_tokens_rstrip_and_user_defined():
    tok = _real("phi-3-mini")
    flags = {a.id: a for a in tok.spec.added_token_flags}
    assert flags[32007].rstrip and not flags[32007].lstrip  # <|end|>
    assert tok.spec.token_types[2] == TokenType.USER_DEFINED  # "</s>" is not special in this file
    assert tok.encode("<|user|>   hi") == tok.encode("<|user|>hi")


@pytest.mark.skipif(not SHARED_PHI3.is_dir(), reason="../shared/real-tokenizers/phi-3-mini is absent")
def test_phi3_from_shared_dir_equals_cache():
    a = load_tokenizer(SHARED_PHI3)
    assert a.vocab_size == 32011 and a.chat_template
    if (REAL / "hf" / "phi-3-mini").is_dir():
        assert a.fingerprint == _real("phi-3-mini").fingerprint


# -- small files: mapping of components -------------------------------------------------------
def _bpe(**model) -> dict:
    m = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u2581": 3, "\u2581a": 4}, "merges": ["a b", "\u2581 a"]}
    m.update(model)
    return m


def _doc(**parts) -> dict:
    d = {"model": _bpe(), "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
         "normalizer": None, "added_tokens": [], "post_processor": None, "decoder": {"type": "ByteLevel"}}
    d.update(parts)
    return d


def _spm(**parts) -> dict:
    d = dict(
        pre_tokenizer=None,
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        decoder={"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    )
    d.update(parts)
    return _doc(**d)


def test_merges_string_and_list_forms_agree():
    a, _ = spec_from_tokenizer_json(_doc())
    b, _ = spec_from_tokenizer_json(_doc(model=_bpe(merges=[["a", "b"], ["\u2581", "a"]])))
    assert a.merges == b.merges == (("a", "b"), ("\u2581", "a"))


def test_a_merge_listed_twice_ranks_where_it_is_listed_last():
    """Worked example (tokenizers 0.23.3): vocab {a, b, c, ab, bc}, merges (a b), (b c), (a b).
    tokenizers ranks the repeated (a b) at 2, after (b c), so "abc" is [a, bc] = [0, 4]; with
    the first rank it would be [ab, c] = [3, 2] (what rmlprep gave). Without the repeat: [3, 2]."""
    doc = _doc(pre_tokenizer={"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
               model=_bpe(vocab={"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}, merges=["a b", "b c", "a b"]))
    spec, _ = spec_from_tokenizer_json(doc)
    assert spec.merges == (("b", "c"), ("a", "b"))
    assert Tokenizer.create(spec).encode("abc") == [0, 4]
    doc["model"]["merges"] = ["a b", "b c"]
    assert Tokenizer.create(spec_from_tokenizer_json(doc)[0]).encode("abc") == [3, 2]


def test_added_tokens_get_ids_as_tokenizers_assigns_them():
    """A token already in the vocab keeps its id; new ones follow the vocab in file order."""
    spec, _ = spec_from_tokenizer_json(_doc(added_tokens=[
        {"id": 2, "content": "ab", "special": True},
        {"id": 5, "content": "<x>", "special": True, "rstrip": True},
        {"id": 6, "content": "<y>", "special": False, "lstrip": True},
    ]))
    assert spec.vocab[5:] == ("<x>", "<y>")
    assert spec.token_types[2] == spec.token_types[5] == TokenType.CONTROL
    assert spec.token_types[6] == TokenType.USER_DEFINED
    flags = {f.id: f for f in spec.added_token_flags}
    assert flags[5].rstrip and flags[6].lstrip
    assert spec.parse_user_defined_always and spec.unparsed_specials == "pass_over"


def test_model_ids_with_gaps_get_placeholders():
    """GPT-4o's model.vocab has 200,000 tokens with ids up to 200,018: the 19 ids no token has
    become UNUSED placeholders (tokenizers decodes them to nothing, no piece can reach them);
    a new added token takes the model's size (its number of tokens), filling a gap."""
    vocab = {"a": 0, "b": 1, "ab": 2, "<e>": 5}
    spec, _ = spec_from_tokenizer_json(_doc(model=_bpe(vocab=vocab, merges=["a b"]), added_tokens=[
        {"id": 5, "content": "<e>", "special": True}, {"id": 4, "content": "<n>", "special": True}]))
    assert len(spec.vocab) == 6 and spec.vocab[4] == "<n>" and spec.vocab[5] == "<e>"
    assert spec.token_types[3] == TokenType.UNUSED and " " in spec.vocab[3]
    assert Tokenizer.create(spec).encode("ab<e>b") == [2, 5, 1]


def test_metaspace_first_maps_to_first_if_missing():
    spec, _ = spec_from_tokenizer_json(_doc(
        pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}))
    assert (spec.kind, spec.prefix_scheme, spec.prefix_if_missing, spec.split_on_space,
            spec.decode_chain) == (SENTENCEPIECE, "first", True, False, (("Metaspace", "\u2581", True),))


def test_template_processing_gives_add_bos_and_add_eos():
    tp = {"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}],
          "special_tokens": {"<s>": {"id": "<s>", "ids": [5]}, "</s>": {"id": "</s>", "ids": [6]}}}
    added = [{"id": 5, "content": "<s>", "special": True}, {"id": 6, "content": "</s>", "special": True}]
    spec, _ = spec_from_tokenizer_json(_spm(post_processor=tp, added_tokens=added))
    assert (spec.bos_id, spec.eos_id, spec.add_bos, spec.add_eos) == (5, 6, True, True)
    # a config's add_eos_token is read only for a class that rebuilds the post-processor from it
    # (fixtures/framing.json, test_add_special_tokens_frames_as_transformers): without a class
    # transformers keeps the file's; with Llama's 4.57.1 drops the EOS and 5.24.0 keeps it: refused
    spec, _ = spec_from_tokenizer_json(_spm(post_processor=tp, added_tokens=added),
                                       config={"add_eos_token": False, "chat_template": "{{x}}"})
    assert (spec.add_bos, spec.add_eos, spec.unset_specials) == (True, True, ())
    spec, _ = spec_from_tokenizer_json(_spm(post_processor=tp, added_tokens=added),
                                       config={"add_eos_token": False, "tokenizer_class": "LlamaTokenizerFast"})
    assert (spec.add_bos, spec.add_eos, spec.eos_id) == (True, False, 6)
    assert len(spec.unset_specials) == 1 and spec.unset_specials[0].startswith(
        "add_eos_token: transformers 4.57.1 and 5.24.0 disagree on this LlamaTokenizerFast folder: 4.x adds none")


def test_a_top_level_byte_level_prefix_space_follows_the_config_as_transformers(tmp_path):
    """transformers sets a top-level ByteLevel pre-tokenizer's ``add_prefix_space`` from the
    config's key (False when left out): GPT2TokenizerFast and Qwen2TokenizerFast in 4.57.1 and
    5.24.0 alike; for PreTrainedTokenizerFast 4.57.1 does and 5.24.0 keeps the file's. rmlprep
    kept the file's. Worked example on GPT-2's tokenizer.json (recorded with both versions,
    ``tok("Hello world", add_special_tokens=False)``): the file edited to ``"add_prefix_space":
    true`` under a GPT2TokenizerFast config without the key gives ``[15496, 995]`` (no prefix;
    ``[18435, 995]`` is ``" Hello world"``); the file's ``false`` under ``"add_prefix_space": true``
    gives ``[18435, 995]``. Without a config, or inside a Sequence, the file's value stands
    (tokenizers); a PreTrainedTokenizerFast disagreement is refused."""
    src = REAL / "hf" / "gpt2"
    if not (src / "tokenizer.json").is_file():
        pytest.skip(f"{src} is absent")
    doc = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    assert doc["pre_tokenizer"]["type"] == "ByteLevel"

    def load(file_value, config):
        d = tmp_path / f"{file_value}-{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps({**doc, "pre_tokenizer": {**doc["pre_tokenizer"],
                                                                               "add_prefix_space": file_value}}))
        if config is not None:
            (d / "tokenizer_config.json").write_text(json.dumps(config))
        return load_tokenizer(d)

    for cls in ("GPT2TokenizerFast", "Qwen2TokenizerFast"):
        assert load(True, {"tokenizer_class": cls}).encode("Hello world") == [15496, 995]
        assert load(False, {"tokenizer_class": cls, "add_prefix_space": True}).encode("Hello world") == [18435, 995]
        assert load(True, {"tokenizer_class": cls, "add_prefix_space": True}).encode("Hello world") == [18435, 995]
    assert load(True, None).encode("Hello world") == [18435, 995]  # tokenizers, the file alone
    assert load(True, {"eos_token": "<|endoftext|>"}).encode("Hello world") == [18435, 995]  # no class
    with pytest.raises(LoaderError, match=r"ByteLevel pre_tokenizer has add_prefix_space = true and tokenizer_config"
                                          r".json leaves add_prefix_space out \(false\): for PreTrainedTokenizerFast"):
        load(True, {"tokenizer_class": "PreTrainedTokenizerFast"})


def test_a_llama_class_config_that_drops_the_prefix_space_is_refused(tmp_path):
    """Mistral 7B's folder (tokenizer.json, tokenizer.model, a LlamaTokenizer config) with
    ``"add_prefix_space": false`` added: transformers 4.57.1 and 5.24.0 rebuild the tokenizer
    from the ``.model`` without the dummy prefix, ``"Hello world"`` -> ``[16230 'Hello', 1526]``;
    rmlprep read the tokenizer.json's ``[22557 '▁Hello', 1526]``. Refused; true or no key load."""
    src = REAL / "hf" / "mistral-7b-v0.1"
    if not (src / "tokenizer.json").is_file():
        pytest.skip(f"{src} is absent")
    (tmp_path / "tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert cfg["tokenizer_class"] == "LlamaTokenizer" and "add_prefix_space" not in cfg
    for value in (True, None):
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({**cfg, "add_prefix_space": value}))
        assert load_tokenizer(tmp_path).encode("Hello world") == [22557, 1526]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**cfg, "add_prefix_space": False}))
    with pytest.raises(LoaderError, match=r"tokenizer_config.json sets add_prefix_space = false for LlamaTokenizer, so "
                                          r"transformers rebuilds the tokenizer without"):
        load_tokenizer(tmp_path)


FRAMING = json.loads((ROOT / "fixtures" / "framing.json").read_text(encoding="utf-8"))


def test_add_special_tokens_frames_as_transformers():
    """What ``add_special_tokens=True`` puts around a text of a tokenizer.json folder, per
    ``tokenizer_class``, post-processor and config keys, against transformers 4.57.1 and 5.24.0
    (``fixtures/framing.json``, ``tools/make_framing_fixtures.py``; 216 folders on Mistral 7B's
    file). rmlprep applied a config's ``add_bos_token`` / ``add_eos_token`` whatever the class,
    so 33 folders of GPT2/Qwen2/PreTrainedTokenizerFast (``"add_eos_token": true`` beside a
    post-processor without ``</s>``: both versions add none) and 14 of CodeLlama and GPT-NeoX
    got other ids than both versions, silently. Where the versions agree the ids are theirs;
    where they disagree (a Llama/Gemma/Cohere config key against the file's post-processor)
    encoding with special tokens is refused naming the key (``TokenizerSpec.unset_specials``)."""
    from tools.make_framing_fixtures import folder_files

    src = REAL / FRAMING["source"]
    if not src.is_file() or hashlib.sha256(src.read_bytes()).hexdigest() != FRAMING["sha256"]:
        pytest.skip(f"{src} is absent or not the file the fixture was made from")
    source = json.loads(src.read_text(encoding="utf-8"))
    # the framing reads the post-processor, the added tokens and the config only: the file's first
    # 259 tokens (<unk>, <s>, </s>, the byte pieces) and no merges keep the ids and parse in ms
    source["model"] = dict(source["model"], merges=[], vocab={t: i for t, i in source["model"]["vocab"].items() if i < 259})
    config = json.loads((src.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert hashlib.sha256((src.parent / "tokenizer_config.json").read_bytes()).hexdigest() == FRAMING["config_sha256"]
    agreed = disputed = 0
    for name, refs in FRAMING["cases"].items():
        tj, cfg = folder_files(source, config, *name.split("|"))
        spec, _ = spec_from_tokenizer_json(tj, config=cfg)
        got = ([spec.bos_id] if spec.add_bos else [], [spec.eos_id] if spec.add_eos else [])
        answers = [(r["prefix"], r["suffix"]) for r in refs.values() if "error" not in r]  # 4.57.1 needs a class
        assert answers, name
        if all(a == answers[0] for a in answers):
            assert (got, spec.unset_specials) == (answers[0], ()), name
            agreed += 1
        else:
            keys = [k for i, k in enumerate(("add_bos_token", "add_eos_token")) if len({str(a[i]) for a in answers}) > 1]
            assert [m.split(":")[0] for m in spec.unset_specials] == keys, name
            assert all(got[i] == [] for i, k in enumerate(("add_bos_token", "add_eos_token")) if k in keys), name
            with pytest.raises(LoaderError, match="^add_special_tokens: add_(bos|eos)_token: transformers 4.57.1 and"):
                Tokenizer.create(spec).encode("x", add_special_tokens=True)
            disputed += 1
    assert (agreed, disputed) == (120, 96)


def test_framing_fixture_is_its_generators():
    """``fixtures/framing.json``'s banner and inputs are its generator's (no transformers needed
    here; the generator's ``--check`` reruns it by hand with the two installs): the generator's
    name, source and text, the two transformers references in every case, and exactly the
    generator's cases (class x post-processor x keys). An edit of the generator's inputs
    without a regeneration fails here."""
    from tools import make_framing_fixtures as gen

    assert (FRAMING["generator"], FRAMING["source"], FRAMING["text"]) == ("tools/make_framing_fixtures.py",
                                                                         gen.SOURCE, gen.TEXT)
    assert [r.split(" ")[:2] for r in FRAMING["references"]] == [["transformers", "4.57.1"], ["transformers", "5.24.0"]]
    assert list(FRAMING["cases"]) == gen.case_names()
    assert all(list(v) == FRAMING["references"] for v in FRAMING["cases"].values())


def test_config_chat_template_and_specials():
    added = [{"id": 5, "content": "<|im_end|>", "special": True}]
    spec, tpl = spec_from_tokenizer_json(_doc(added_tokens=added),
                                         config={"eos_token": {"content": "<|im_end|>"}, "chat_template": "T"})
    assert (spec.eos_id, spec.eot_ids, tpl) == (5, (5,), "T")


# -- refusals: each names the component by its JSON path ---------------------------------------
@pytest.mark.parametrize(
    "doc, message",
    [
        pytest.param(_doc(model={"type": "Unigram", "vocab": [["a", 0.0]]}),
                     "model.type = 'Unigram' is not supported; rmlprep supports BPE", id="unigram"),
        pytest.param(_doc(model={"type": "WordPiece", "vocab": {"a": 0}}),
                     "model.type = 'WordPiece' is not supported", id="wordpiece"),
        pytest.param(_doc(normalizer={"type": "BertNormalizer"}),
                     "normalizer.type = 'BertNormalizer' is not supported", id="bert-normalizer"),
        pytest.param(_doc(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Strip"}]}),
                     "normalizer.normalizers[1].type = 'Strip' is not supported", id="strip-in-sequence"),
        pytest.param(_doc(model=_bpe(continuing_subword_prefix="##")),
                     "model.continuing_subword_prefix = '##' is not supported", id="subword-prefix"),
        pytest.param(_doc(model=_bpe(end_of_word_suffix="</w>")),
                     "model.end_of_word_suffix = '</w>' is not supported", id="word-suffix"),
        pytest.param(_doc(model=_bpe(dropout=0.1)), "model.dropout = 0.1 is not supported", id="dropout"),
        pytest.param(_doc(pre_tokenizer={"type": "Whitespace"}),
                     "pre_tokenizer.type = 'Whitespace' is not supported", id="whitespace-pretok"),
        pytest.param(_doc(pre_tokenizer=None), "no space handling", id="neither-space-style"),
        pytest.param(_doc(normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}),
                     "has both ByteLevel pre-tokenizer (pre_tokenizer) and Replace", id="both-space-styles"),
        pytest.param(_doc(pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": ""}, "behavior": "Removed", "invert": False},
            {"type": "ByteLevel", "use_regex": False}]}),
            "pre_tokenizer.pretokenizers[0].pattern an empty Split pattern is not supported", id="split-empty"),
        pytest.param(_spm(normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                          pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": "Removed",
                                         "invert": True}),
                     "removes all text; not supported", id="split-removes-everything"),
        pytest.param(_doc(added_tokens=[{"id": 5, "content": "<y>", "special": False, "single_word": True}]),
                     "added_tokens[0].single_word = true for '<y>' is not supported", id="single-word"),
        pytest.param(_spm(added_tokens=[{"id": 5, "content": "<y>", "special": False, "normalized": True}]),
                     "added_tokens[0].normalized = true for '<y>' with a Prepend normalizer is not supported",
                     id="normalized-with-prepend"),
        # tokenizers 0.23.3 on a trained 800-token ByteLevel BPE with Lowercase and these two:
        # "hello world" began with 803 in four of six processes, 804 in two (a hash-map order)
        pytest.param(_doc(normalizer={"type": "Lowercase"}, added_tokens=[
            {"id": 5, "content": "Hello", "special": False, "normalized": True},
            {"id": 6, "content": "hello", "special": True, "normalized": True}]),
            "added_tokens[1] ('hello', id 6) and added_tokens[0] ('Hello', id 5) are both normalized and both "
            "normalize to 'hello'", id="normalized-twins"),
        pytest.param(_doc(post_processor={"type": "BertProcessing"}),
                     "post_processor.type = 'BertProcessing' is not supported", id="bert-processing"),
        pytest.param(_doc(post_processor={"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "a"}}, {"SpecialToken": {"id": "b"}}, {"Sequence": {"id": "A"}}],
            "special_tokens": {"a": {"ids": [0]}, "b": {"ids": [1]}}}),
            "rmlprep supports at most one token on each side", id="two-bos"),
        # tokenizers 0.23.3 on Llama 3's file with these two: [128000, 128001, 13347, 1070] for
        # "Hi there" (BOS, EOS, then the text); rmlprep merged them to [128000, 13347, 1070, 128001]
        pytest.param(_doc(post_processor={"type": "Sequence", "processors": [
            {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "a"}}, {"Sequence": {"id": "A"}}],
             "special_tokens": {"a": {"ids": [0]}}},
            {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "b"}}],
             "special_tokens": {"b": {"ids": [1]}}}]}),
            "post_processor.processors[1] is a second TemplateProcessing", id="two-templates"),
    ],
)
def test_unsupported_components_are_named(doc, message):
    with pytest.raises(UnsupportedTokenizer) as e:
        spec_from_tokenizer_json(doc)
    assert message in str(e.value)
    assert str(e.value).startswith("tokenizer.json: ")


def test_errors_carry_the_file_path(tmp_path):
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(_doc(model={"type": "Unigram", "vocab": []})))
    with pytest.raises(UnsupportedTokenizer, match=f"^{p}: model.type = 'Unigram'"):
        spec_from_tokenizer_json(p)


def test_malformed_json(tmp_path):
    p = tmp_path / "tokenizer.json"
    p.write_text('{"model": {"type": "BPE", ')
    with pytest.raises(LoaderError, match="not valid JSON"):
        spec_from_tokenizer_json(p)
    p.write_text("[1, 2]")
    with pytest.raises(LoaderError, match=r"not a Hugging Face tokenizer\.json \(a JSON list at the top level\)"):
        spec_from_tokenizer_json(p)


def test_missing_file(tmp_path):
    with pytest.raises(LoaderError, match="no such file"):
        spec_from_tokenizer_json(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "model, message",
    [
        pytest.param(_bpe(vocab={"a": 0, "b": 70000}), "is not an id in range(0, 65538)", id="vocab-gap"),
        pytest.param(_bpe(vocab={"a": 0, "b": -1}), "is not an id in range(0, 65538)", id="vocab-negative"),
        pytest.param(_bpe(vocab={"a": 0, "b": 0}), "= 0 is also the id of", id="vocab-duplicate"),
        pytest.param(_bpe(merges=["a b c"]), "model.merges[0] = 'a b c' is not 'left right'", id="bad-merge"),
        pytest.param(_bpe(unk_token="<unk>"), "model.unk_token = '<unk>' is not in the vocab", id="bad-unk"),
    ],
)
def test_malformed_model(model, message):
    with pytest.raises(LoaderError) as e:
        spec_from_tokenizer_json(_doc(model=model))
    assert message in str(e.value)


def test_merge_outside_vocab_is_a_loader_error(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(_doc(model=_bpe(merges=["a q"]))))
    with pytest.raises(LoaderError, match="merges\\[0\\] = 'a' 'q' uses 'q', which is not in the vocab"):
        load_tokenizer(tmp_path)


# -- live comparisons with Hugging Face tokenizers ----------------------------------------------
def _texts_for_parity() -> list[str]:
    try:
        texts = corpus_texts(n_text=855, n_chat=1500, max_bytes=4096)
    except FileNotFoundError:
        pytest.skip("../shared/corpora is absent")
    return HARD_STRINGS + texts


@pytest.mark.parity
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in HF_NAMES])
def test_parity_with_tokenizers_on_real_documents(name):
    tokenizers = pytest.importorskip("tokenizers")
    tok = _real(name)
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf" / name / "tokenizer.json"))
    texts = _texts_for_parity()
    assert len(texts) >= 2000
    n_tokens = 0
    _, plain = _reference(name)
    for asp, ps in ((False, True), (True, True), (False, False)):
        refs = (ref if ps else plain).encode_batch(texts, add_special_tokens=asp)
        for text, r in zip(texts, refs):
            ids = tok.encode(text, add_special_tokens=asp, parse_special=ps)
            assert ids == r.ids, f"{name} add_special_tokens={asp} parse_special={ps}: first difference at " \
                f"{_first_mismatch(ids, r.ids)} for {text[:100]!r}"
            n_tokens += len(ids)
            if not asp:
                assert tok.decode(ids) == ref.decode(r.ids, skip_special_tokens=False), text[:100]
                assert tok.decode(ids, skip_special_tokens=True) == ref.decode(r.ids, skip_special_tokens=True)
    print(f"{name}: {len(texts)} documents x 3, {n_tokens} tokens, 0 mismatches")


_VARIANTS = {
    "metaspace-first-split": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    "metaspace-always-nosplit": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                                 "split": False},
    "metaspace-never": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True},
}


@pytest.mark.parity
@pytest.mark.parametrize("variant", list(_VARIANTS))
def test_parity_metaspace_variants(variant):
    """Mistral's vocabulary under a Metaspace pre-tokenizer instead of the legacy normalizers."""
    tokenizers = pytest.importorskip("tokenizers")
    path = REAL / "hf" / "mistral-7b-v0.1" / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    d = json.loads(path.read_text(encoding="utf-8"))
    d["normalizer"] = None
    d["pre_tokenizer"] = _VARIANTS[variant]
    d["decoder"] = {"type": "Sequence", "decoders": [{"type": "Metaspace", "replacement": "\u2581",
                    "prepend_scheme": _VARIANTS[variant]["prepend_scheme"], "split": True},
                    {"type": "ByteFallback"}, {"type": "Fuse"}]}
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok = Tokenizer.create(spec_from_tokenizer_json(d)[0])
    texts = HARD_STRINGS + ["<s>hello", "x<s>hello", " hi", "\u2581hi", "a  b", "</s> x </s>"] + \
        corpus_texts(n_text=100, n_chat=100, max_bytes=1024)
    for text in texts:
        for asp in (False, True):
            r = ref.encode(text, add_special_tokens=asp).ids
            assert tok.encode(text, add_special_tokens=asp) == r, (variant, text[:80], asp)
        assert tok.decode(r) == ref.decode(r, skip_special_tokens=False), (variant, text[:80])


@pytest.mark.parity
def test_parity_byte_level_prefix_space_and_digits():
    """GPT-2's vocabulary with add_prefix_space=True, and with a Digits split in front."""
    tokenizers = pytest.importorskip("tokenizers")
    path = REAL / "hf" / "gpt2" / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    base = json.loads(path.read_text(encoding="utf-8"))
    variants = []
    d = json.loads(json.dumps(base))
    d["pre_tokenizer"]["add_prefix_space"] = True
    variants.append(d)
    d = json.loads(json.dumps(base))
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    variants.append(d)
    d = json.loads(json.dumps(base))
    d["normalizer"] = {"type": "NFKC"}
    variants.append(d)
    texts = HARD_STRINGS + ["x<|endoftext|>y", " <|endoftext|> a"] + corpus_texts(n_text=100, n_chat=100,
                                                                                    max_bytes=1024)
    for d in variants:
        ref = tokenizers.Tokenizer.from_str(json.dumps(d))
        tok = Tokenizer.create(spec_from_tokenizer_json(d)[0])
        for text in texts:
            assert tok.encode(text) == ref.encode(text).ids, (d["pre_tokenizer"], d["normalizer"], text[:80])


@pytest.mark.parity
def test_byte_level_prefix_space_before_metaspace_char():
    tokenizers = pytest.importorskip("tokenizers")
    path = REAL / "hf" / "gpt2" / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    d = json.loads(path.read_text(encoding="utf-8"))
    d["pre_tokenizer"]["add_prefix_space"] = True
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok = Tokenizer.create(spec_from_tokenizer_json(d)[0])
    assert tok.encode("\u2581a") == ref.encode("\u2581a").ids


@pytest.mark.parity
def test_gpt4o_matches_tiktoken_o200k_from_the_same_ranks():
    """GPT-4o's tokenizer.json against tiktoken's o200k_base Encoding built from that file's own
    vocab (rank = id, bytes from the byte alphabet; no download), on more than 2,000 documents:
    encode with specials, encode_ordinary, decode."""
    tok, enc = _real("gpt-4o"), _o200k_from_gpt4o()
    texts = _texts_for_parity()
    assert len(texts) >= 2000
    for text in texts:
        ids = tok.encode(text)
        assert ids == enc.encode(text, allowed_special="all"), text[:100]
        assert tok.encode(text, parse_special=False) == enc.encode_ordinary(text), text[:100]
        assert tok.decode(ids) == enc.decode(ids)


_ENC: list = []


def _o200k_from_gpt4o():
    """tiktoken's o200k_base Encoding with the ranks of GPT-4o's tokenizer.json (rank = id)."""
    tiktoken = pytest.importorskip("tiktoken")
    if not _ENC:
        from rmlprep.unicode import unicode_to_bytes

        _real("gpt-4o")  # skips when the file is absent
        d = json.loads((REAL / "hf" / "gpt-4o" / "tokenizer.json").read_text(encoding="utf-8"))
        u2b = unicode_to_bytes()
        ranks = {bytes(u2b[c] for c in t): i for t, i in d["model"]["vocab"].items()
                 if all(c in u2b for c in t) and not t.startswith("<|")}
        specials = {a["content"]: a["id"] for a in d["added_tokens"]}
        assert len(ranks) == 199998 and specials == {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
        _ENC.append(tiktoken.Encoding("o200k_base-from-gpt-4o", pat_str=O200K_PATTERN, mergeable_ranks=ranks,
                                      special_tokens=specials))
    return _ENC[0]


@pytest.mark.parity
@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(codec=None, blacklist_categories=()) | st.integers(0xD800, 0xDFFF).map(chr),
                    max_size=30))
def test_surrogates_give_tiktoken_ids(text):
    """Any str, lone and paired surrogates included: the ids equal tiktoken's (which replaces
    them, see rmlprep.segment.replace_lone_surrogates) and decode to valid UTF-8."""
    tok, enc = _real("gpt-4o"), _o200k_from_gpt4o()
    ids = tok.encode(text)
    assert ids == enc.encode(text, allowed_special="all")
    assert tok.encode(text, parse_special=False) == enc.encode_ordinary(text)
    tok.decode_bytes(ids).decode("utf-8")  # raises on bytes that are not UTF-8


def _with_added(base: str, normalizer, added: list[dict]) -> dict:
    d = json.loads((REAL / "hf" / base / "tokenizer.json").read_text(encoding="utf-8"))
    d["normalizer"] = normalizer
    start = max(d["model"]["vocab"].values()) + 1 + len(d["added_tokens"])
    d["added_tokens"] = d["added_tokens"] + [
        {"id": start + k, "single_word": False, "lstrip": False, "rstrip": False, **a} for k, a in enumerate(added)]
    return d


_ADDED = [
    {"content": "<Think>", "normalized": True, "special": False},  # lowercased: matches "<THINK>", "<think>"
    {"content": "<RAW>", "normalized": False, "special": False},  # only the raw "<RAW>"
    {"content": "<Sys>", "normalized": True, "special": True},
    {"content": "<End>", "normalized": False, "special": True, "rstrip": True},
    {"content": "ab", "normalized": False, "special": False},  # inside words, before normalization
    {"content": "<Ġx>", "normalized": False, "special": False},
]
_ADDED_TEXTS = [
    "x<Think>y <THINK> <think>z", "<RAW> <raw> <Raw>", "<Sys>s<SYS> <sys>", "<End>   after <end>  x",
    "cab ABBA abab", "<Ġx> <ġx> ĠX", "<Thi<RAW>nk>", "<Th<End>ink>", "no tokens here",
    "<|endoftext|><Think><|endoftext|>", "<Thinkab>", "İ Σ ΑΣ ß ẞ",
    # capitals of Unicode 16.0 and 17.0, which Python 3.11's str.lower leaves as they are
    "\U00010D50\U00010D71\U00010D52 Garay <THINK>\u1c89 \ua7cbAMS \ua7ceAb \U00016EA0x",
]


#: (tokenizer, normalizer) pairs for the added-token tests: byte-level and SentencePiece, with
#: normalizers that change the text (so normalized added tokens match elsewhere than raw ones)
_NORMALIZED_CASES = [
    pytest.param("gpt2", {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
                 id="byte-level-nfkc-lowercase"),
    pytest.param("gpt2", None, id="byte-level-no-normalizer"),
    pytest.param("mistral-7b-v0.1", {"type": "Sequence", "normalizers": [
        {"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
                 id="sentencepiece-lowercase"),
]


def _added_references(base: str, normalizer):
    """(tokenizers reference, the same with encode_special_tokens, rmlprep's Tokenizer) of
    ``base`` with ``normalizer`` and the added tokens of :data:`_ADDED`."""
    tokenizers = pytest.importorskip("tokenizers")
    d = _with_added(base, normalizer, _ADDED)
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    plain = tokenizers.Tokenizer.from_str(json.dumps(d))
    plain.encode_special_tokens = True
    return ref, plain, Tokenizer.create(spec_from_tokenizer_json(d)[0])


@pytest.mark.parity
@pytest.mark.parametrize("base, normalizer", [
    pytest.param("gpt2", {"type": "Lowercase"}, id="byte-level-lowercase"), *_NORMALIZED_CASES])
def test_added_tokens_normalized_and_not_live(base, normalizer):
    """Added tokens with normalized true match by their normalized content on the normalized
    text, after the normalized-false ones took theirs from the raw text; both kinds, special or
    not, with parse_special True and False; and their decoding."""
    ref, plain, tok = _added_references(base, normalizer)
    for text in _ADDED_TEXTS + HARD_STRINGS:
        for asp in (False, True):
            r = ref.encode(text, add_special_tokens=asp).ids
            assert tok.encode(text, add_special_tokens=asp) == r, (text, asp)
            assert tok.encode(text, add_special_tokens=asp, parse_special=False) == \
                plain.encode(text, add_special_tokens=asp).ids, (text, asp)
        assert tok.decode(r) == ref.decode(r, skip_special_tokens=False), text
        assert tok.decode(r, skip_special_tokens=True) == ref.decode(r, skip_special_tokens=True), text
    for a in _ADDED:
        i = ref.token_to_id(a["content"])
        assert tok.decode([i]) == ref.decode([i], skip_special_tokens=False), a


@pytest.mark.parity
def test_added_token_decoding_goes_through_byte_level_live():
    """tokenizers' ByteLevel decoder sees added tokens too: "<Ġx>" decodes as "< x>"; a token
    with a character outside the byte alphabet (a space) decodes as its UTF-8 text."""
    tokenizers = pytest.importorskip("tokenizers")
    added = [{"content": c, "normalized": False, "special": sp} for c, sp in
             [("<Ġx>", False), ("<é s>", True), ("<éĠ>", True), ("ĠĊ", False), ("<|x|>", True)]]
    d = _with_added("gpt2", None, added)
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok = Tokenizer.create(spec_from_tokenizer_json(d)[0])
    for a in added:
        i = ref.token_to_id(a["content"])
        for ids in ([i], [32, i, 32]):
            assert tok.decode(ids) == ref.decode(ids, skip_special_tokens=False), a
    assert tok.decode([ref.token_to_id("<Ġx>")]) == "< x>"


@pytest.mark.parity
@pytest.mark.parametrize("base, normalizer", _NORMALIZED_CASES)
def test_cut_added_and_its_parts_give_the_references_ids_live(base, normalizer):
    """``cut_added`` gives the pieces ``encode`` encodes (normalized ones matched on the
    normalized text), and ``cut_added_parts`` over a text cut into parts of one mode gives the
    ids of the joined text, tokens across borders included; where a normalizer changes the text
    across a border it refuses instead."""
    ref, plain, tok = _added_references(base, normalizer)
    assert tok.cuts_normalized
    refused = 0
    for text in _ADDED_TEXTS + HARD_STRINGS:
        for ps, reference in ((True, ref), (False, plain)):
            want = reference.encode(text, add_special_tokens=False).ids
            pieces = tok.cut_added(text, parse_special=ps)
            assert tok.encode_fragments(pieces, normalized=True)[0] == want, (text, ps)
            for step in (1, 3):
                parts = [(text[i:i + step], ps) for i in range(0, len(text), step)]
                try:
                    cut = tok.cut_added_parts(parts)
                except TokenizeError as e:
                    assert "normalizes differently" in str(e)
                    refused += 1
                    continue
                assert tok.encode_fragments([f for f, _, _ in cut], normalized=True)[0] == want, (text, ps, step)
    assert refused < 20  # the final sigma and the like, not every text


def test_cut_added_parts_refuses_what_no_cut_gives_exactly():
    """A token's text across a part that parses it and one that does not has no exact cut
    (the id would forge a marker, the text would miss one); nor has text that the normalizer
    changes across a border (NFC composes "e" + U+0301)."""
    d = _with_added("gpt2", {"type": "NFC"}, _ADDED)
    tok = Tokenizer.create(spec_from_tokenizer_json(d)[0])
    with pytest.raises(TokenizeError, match="spans parts 0 to 1"):
        tok.cut_added_parts([("x<|endof", False), ("text|>", True)])
    with pytest.raises(TokenizeError, match="normalizes differently"):
        tok.cut_added_parts([("cafe", False), ("\u0301!", True)])
    # the same texts in one part, or with both parts parsing, are cut
    assert tok.cut_added_parts([("x<|endof", True), ("text|>", True)]) == [("x", 0, 0), (50256, 0, 1)]
    assert tok.cut_added_parts([("cafe\u0301!", False)]) == [("caf\u00e9!", 0, 0)]


def test_decode_bytes_drops_the_ids_gpt4o_gives_no_token_as_decode_does():
    """GPT-4o's 19 ids without a token: ``tokenizers``' decode drops them, and so do rmlprep's
    ``decode`` and (it gave their placeholder text) ``decode_bytes``. Expected: the reference's
    decoding, on ids with every gap among ordinary tokens."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = _real("gpt-4o")
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf" / "gpt-4o" / "tokenizer.json"))
    gaps = [i for i in range(len(tok.spec.vocab)) if ref.id_to_token(i) is None]
    assert len(gaps) == 19 and sorted(tok._gap_ids) == gaps
    ids = [x for g in gaps for x in (g, 40, 3381)]
    want = ref.decode(ids)
    assert want and tok.decode(ids) == want and tok.decode_bytes(ids) == want.encode()
    stream = tok.stream_decoder()
    assert "".join(stream.push(i) for i in ids) + stream.flush() == want
