#!/usr/bin/env python3
"""The Hugging Face side of bench/generate-gpu (the GPU machine: torch, transformers, tokenizers).

  generate_peer.py make OUT            GPT-2 124M and a Llama of about 1B parameters with grouped-query attention, from
                                       configs with random weights (seeded), saved with save_pretrained into OUT/gpt2 and
                                       OUT/llama (the Llama's weights as bf16, as Llama checkpoints ship), each with a
                                       byte-level BPE tokenizer trained here on OUT/text.txt (GPT-2's pre-tokenizer for
                                       GPT-2, Llama 3's regex split and BOS template for the Llama); OUT/text.txt is a
                                       varied text of more than 10 000 characters, OUT/NAME/prompt.txt its longest prefix
                                       (cut at a space) of at most 512 tokens
  generate_peer.py reference OUT NAME  the prompt's token ids, Hugging Face's fp32 logits at every prompt position (GPU,
                                       TF32 off) and its greedy continuation of 128 tokens, into OUT/NAME/reference.*
  generate_peer.py compare OUT NAME GLNET.json LOGITS.npy IDS.json
                                       glnet's token ids, logits and greedy tokens against the reference: one line
  generate_peer.py time OUT NAME       decode tokens/s at batch 1 from the 512-token prompt (128 new tokens): Hugging
                                       Face generate eager (dynamic cache) and with a static cache, whose decode step
                                       generate compiles with mode reduce-overhead (CUDA graphs); JSON on stdout
"""
import json
import os
import sys
import time

import numpy as np
import torch

NEW_TOKENS = 128
PROMPT_TOKENS = 512
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                r"\s+(?!\S)|\s+")


def varied_text():
    """More than 10 000 characters: prose, code, numbers, several scripts, emoji, combining marks, whitespace runs."""
    parts = []
    prose = ("The quick brown fox jumps over the lazy dog while 12 engineers measure 3.14159 watts at 09:45. "
             "It's what they'll say; we've known it's done, and I'm sure you'd agree. ")
    code = "def f(x):\n    return [i ** 2 for i in range(x) if i % 3 == 0]  # squares\n\n\tif (a && b) { c += 0x1F; }\n"
    scripts = ("Größe und Maß — naïve café. Привет, как дела? Γειά σου κόσμε. 日本語のテキストと漢字。"
               "中文文本，包括标点符号。한국어 문장도 있습니다. مرحبا بالعالم. שלום עולם. हिन्दी पाठ। ")
    symbols = "Emoji: 😀🎉👩‍💻🇫🇷 and e\u0301 a\u0308 combining; tabs\t\tand   spaces    and\n\n\nnewlines. "
    numbers = " ".join(str(n * 7919 % 100003) for n in range(60)) + ". "
    for i in range(12):
        parts += [prose, code, scripts, symbols, numbers, f"Paragraph {i}: " + prose[::-1] + "\n"]
    text = "".join(parts)
    assert len(text) > 10000
    return text


def train_tokenizer(text, style):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    if style == "gpt2":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>"]
    else:
        tokenizer = Tokenizer(models.BPE(ignore_merges=True))
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([text], trainer)
    if style == "llama":
        bos = tokenizer.token_to_id("<|begin_of_text|>")
        tokenizer.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    return tokenizer


def make(out):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    os.makedirs(out, exist_ok=True)
    text = varied_text()
    with open(os.path.join(out, "text.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    torch.manual_seed(0)
    models = {
        "gpt2": (GPT2LMHeadModel(GPT2Config()), "gpt2", torch.float32),
        # Llama 3.2 1B's shape: 16 layers, hidden 2048, 32 query heads over 8 KV heads, SwiGLU 8192, tied embeddings.
        "llama": (LlamaForCausalLM(LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                               num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                                               rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=128000,
                                               eos_token_id=128001,
                                               rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
                  "llama", torch.bfloat16),
    }
    for name, (model, style, dtype) in models.items():
        folder = os.path.join(out, name)
        model.to(dtype).save_pretrained(folder, safe_serialization=True)
        tokenizer = train_tokenizer(text, style)
        tokenizer.save(os.path.join(folder, "tokenizer.json"))
        # The longest prefix cut at a space that encodes to at most PROMPT_TOKENS tokens.
        cuts = [i for i, c in enumerate(text) if c == " "]
        low, high = 0, len(cuts) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if len(tokenizer.encode(text[:cuts[middle]]).ids) <= PROMPT_TOKENS:
                low = middle
            else:
                high = middle - 1
        with open(os.path.join(folder, "prompt.txt"), "w", encoding="utf-8") as f:
            f.write(text[:cuts[low]])
        print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, stored {dtype}, "
              f"prompt of {len(tokenizer.encode(text[:cuts[low]]).ids)} tokens")


def load(out, name):
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    folder = os.path.join(out, name)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").cuda().eval()
    tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "prompt.txt"), encoding="utf-8") as f:
        prompt = f.read()
    return model, tokenizer, prompt


def reference(out, name):
    model, tokenizer, prompt = load(out, name)
    ids = tokenizer.encode(prompt).ids
    with torch.no_grad():
        logits = model(torch.tensor([ids], device="cuda")).logits[0].float().cpu().numpy()
        generated = model.generate(torch.tensor([ids], device="cuda"), max_new_tokens=NEW_TOKENS, do_sample=False,
                                   pad_token_id=model.config.eos_token_id)[0, len(ids):].tolist()
    folder = os.path.join(out, name)
    np.save(os.path.join(folder, "reference-logits.npy"), logits)
    # The tokenizer on the whole varied text too, for the ids comparison.
    with open(os.path.join(out, "text.txt"), encoding="utf-8") as f:
        text_ids = tokenizer.encode(f.read()).ids
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump({"prompt_ids": ids, "generated_ids": generated, "text_ids": text_ids}, f)


def compare(out, name, glnet_json, logits_path, ids_path):
    folder = os.path.join(out, name)
    ref = json.load(open(os.path.join(folder, "reference.json")))
    ours = json.load(open(glnet_json))
    try:
        our_text_ids = json.load(open(ids_path))["ids"]  # glnet_info --tokenizer --encode: {"ids", "decoded"}
    except (OSError, ValueError, KeyError, TypeError):
        our_text_ids = None
    want = np.load(os.path.join(folder, "reference-logits.npy"))
    got = np.load(logits_path)
    parts = []
    if our_text_ids is None:
        parts.append("text ids: glnet's missing")
    else:
        parts.append(f"text ids {'equal' if our_text_ids == ref['text_ids'] else 'DIFFER'} ({len(ref['text_ids'])} tokens)")
    if got.shape != want.shape:
        parts.append(f"logits shape {got.shape} vs {want.shape}: DIFFER")
    else:
        error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        parts.append(f"logits max |diff| / max |logit| = {error:.2e} ({'OK' if error <= 1e-4 else 'OVER 1e-4'}) over {want.shape[0]} positions")
    same = 0
    for a, b in zip(ours["generated_ids"], ref["generated_ids"]):
        if a != b:
            break
        same += 1
    parts.append(f"greedy: {same} of {len(ref['generated_ids'])} tokens identical"
                 + ("" if same == len(ref["generated_ids"]) == len(ours["generated_ids"]) else " (DIFFER)"))
    print("; ".join(parts))


def time_decode(out, name):
    model, tokenizer, prompt = load(out, name)
    ids = torch.tensor([tokenizer.encode(prompt).ids], device="cuda")
    pad = model.config.eos_token_id if isinstance(model.config.eos_token_id, int) else model.config.eos_token_id[0]
    result = {"torch": torch.__version__}

    def rate(runs=3, **kwargs):
        """Decode tokens/s: the time of 1 + NEW_TOKENS new tokens less that of 1 (the prompt's pass), medians."""
        def once(new):
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.no_grad():
                model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=pad, **kwargs)
            torch.cuda.synchronize()
            return time.perf_counter() - start
        once(1 + NEW_TOKENS)  # warm-up (and compilation)
        once(1 + NEW_TOKENS)
        whole = sorted(once(1 + NEW_TOKENS) for _ in range(runs))[runs // 2]
        first = sorted(once(1) for _ in range(runs))[runs // 2]
        return NEW_TOKENS / (whole - first), first

    result["eager_tokens_per_second"], result["eager_prompt_seconds"] = rate()
    try:
        # A static cache makes generate compile the decode step itself (mode reduce-overhead: CUDA graphs).
        from transformers import CompileConfig
        result["graph_tokens_per_second"], _ = rate(cache_implementation="static",
                                                    compile_config=CompileConfig(fullgraph=True, mode="reduce-overhead"))
    except Exception as failure:  # noqa: BLE001 -- reported, not hidden
        result["graph_error"] = f"{type(failure).__name__}: {str(failure).splitlines()[0][:300]}"
    print(json.dumps(result))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    command, out = sys.argv[1], sys.argv[2]
    if command == "make":
        make(out)
    elif command == "reference":
        reference(out, sys.argv[3])
    elif command == "compare":
        compare(out, *sys.argv[3:7])
    elif command == "time":
        time_decode(out, sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
