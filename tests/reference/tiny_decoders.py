#!/usr/bin/python3
"""tiny_decoders.py OUT_DIR: tiny decoder-only language models as Hugging Face folders, with their float64 outputs.

Debian's PyTorch 1.13 has no transformers package, so the modules below mirror transformers' GPT2LMHeadModel and
LlamaForCausalLM (and Qwen2ForCausalLM, a Llama with q/k/v biases) line for line, with the same parameter names, so
that a state_dict here is what save_pretrained writes there:

  gpt2    GPT2LMHeadModel: learned positions, pre-LayerNorm blocks, Conv1D layers (weights [in, out], q/k/v side by
          side in c_attn), causal attention scaled by 1/sqrt(head size), the tanh GELU (gelu_new), a final LayerNorm
          and the LM head tied to the token embedding (no lm_head.weight in the file, as save_pretrained drops it).
          F32, one model.safetensors, names with the "transformer." prefix.
  llama   LlamaForCausalLM: RMSNorm x * rsqrt(mean(x^2) + eps) * w, rotary embeddings in transformers' rotate_half
          convention with Llama 3.1's rope scaling (llama3: factor 8, original context 32, so that the high, blended
          and low frequency bands each hold some of the 8 frequencies), SwiGLU MLP, grouped-query attention (4 heads,
          2 key/value heads), no biases, an untied lm_head. F32, sharded into 2 files with model.safetensors.index.json.
  qwen2   Qwen2ForCausalLM: the Llama layers with biases on q, k and v (none on o), rope_theta 1e6, unscaled, tied
          embeddings, eos_token_id a list. Stored as BF16 (the weights are rounded to bfloat16 first, so the float64
          outputs are those of the stored values).

Sizes are tiny for CI on llvmpipe: hidden 64, 4 heads of 16, MLP 176, vocabulary 576, 64 positions, 2 or 3 layers.
Weights are random (seeded) with scales that keep activations of order 1 and make the logits peaked, so that the
greedy choices are clear (their margins are recorded). For each model the folder holds, besides config.json and the
weights:
  expected-logits.npy     float64 [11, 576]: the logits of the model in float64 (model.double()) for PROMPT
  expected.json           {"prompt": ids, "greedy": 32 ids, "margins": top-1 minus top-2 logit at each greedy step,
                           "first_eos": index in greedy of the first EOS id or null (the continuation does not stop
                           there), "inverse_frequencies": the rotary frequencies (Llama family), "stored_dtype"}
  expected-layers.safetensors  layer 0's and the embeddings' tensors in glnet's canonical layout (nn.Linear's
                           [out, in]; GPT-2's q/k/v split out of c_attn), F32, under DecoderLayerWeights' field names
                           ("layers.0.query", "tokenEmbedding", ...), for checking the mapping of Hugging Face names
Greedy decoding recomputes the whole sequence at each step (no cache), the plainest form of the model.
tests/CMakeLists.txt runs this into the build tree (ctest decoder.tiny_models) before the tests that read it.
"""
import json, math, os, shutil, struct, sys

import numpy as np
import torch
from torch import nn

# The vocabulary covers the project's test tokenizer (tests/data/tokenizer/tokenizer.json, 559 ids), which every folder
# gets a copy of, so that the folders run as they are through glnet_generate and the server.
VOCABULARY, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, POSITIONS = 576, 64, 4, 2, 176, 64
TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer", "tokenizer.json")
HEAD = HIDDEN // HEADS
# With tied embeddings, an embedding as large as the layers' outputs makes the next token the last one again and again;
# a quarter of that (and a final norm 4 times larger, so the logits stay peaked) gives varied continuations.
TIED_EMBEDDING = 0.25
PROMPT = [1, 17, 42, 99, 5, 256, 300, 7, 128, 64, 3]
CONTINUATION = 32


# ---- GPT-2, as transformers.models.gpt2.modeling_gpt2 ----

class Conv1D(nn.Module):
    """transformers' Conv1D: a linear layer with its weight stored [in, out]."""

    def __init__(self, out_features, in_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features))

    def forward(self, x):
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(x.size()[:-1] + (self.weight.size(-1),))


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def causal_attention(query, key, value):
    """query [heads, n, d], key and value [heads, n, d]: softmax(q k^T / sqrt(d) + causal mask) v."""
    n = query.shape[-2]
    scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(query.shape[-1])
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    scores = torch.where(mask, scores, torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype))
    return torch.matmul(torch.softmax(scores, dim=-1), value)


class GPT2Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(3 * HIDDEN, HIDDEN)
        self.c_proj = Conv1D(HIDDEN, HIDDEN)

    def forward(self, x):
        query, key, value = self.c_attn(x).split(HIDDEN, dim=-1)
        split = lambda t: t.view(-1, HEADS, HEAD).transpose(0, 1)
        out = causal_attention(split(query), split(key), split(value))
        return self.c_proj(out.transpose(0, 1).reshape(-1, HIDDEN))


class GPT2MLP(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.c_fc = Conv1D(inner, HIDDEN)
        self.c_proj = Conv1D(HIDDEN, inner)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN, eps=config["layer_norm_epsilon"])
        self.attn = GPT2Attention()
        self.ln_2 = nn.LayerNorm(HIDDEN, eps=config["layer_norm_epsilon"])
        self.mlp = GPT2MLP(4 * HIDDEN)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(VOCABULARY, HIDDEN)
        self.wpe = nn.Embedding(POSITIONS, HIDDEN)
        self.h = nn.ModuleList(GPT2Block(config) for _ in range(config["n_layer"]))
        self.ln_f = nn.LayerNorm(HIDDEN, eps=config["layer_norm_epsilon"])

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(len(ids)))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)

    def forward(self, ids):
        return self.transformer(ids) @ self.transformer.wte.weight.t()  # the tied lm_head

    def canonical(self):
        block = self.transformer.h[0]
        w = block.attn.c_attn.weight
        return {"tokenEmbedding": self.transformer.wte.weight, "positionEmbedding": self.transformer.wpe.weight,
                "layers.0.query": w[:, :HIDDEN].t(), "layers.0.key": w[:, HIDDEN:2 * HIDDEN].t(),
                "layers.0.value": w[:, 2 * HIDDEN:].t(), "layers.0.output": block.attn.c_proj.weight.t(),
                "layers.0.queryBias": block.attn.c_attn.bias[:HIDDEN], "layers.0.keyBias": block.attn.c_attn.bias[HIDDEN:2 * HIDDEN],
                "layers.0.valueBias": block.attn.c_attn.bias[2 * HIDDEN:], "layers.0.outputBias": block.attn.c_proj.bias,
                "layers.0.up": block.mlp.c_fc.weight.t(), "layers.0.down": block.mlp.c_proj.weight.t(),
                "layers.0.upBias": block.mlp.c_fc.bias, "layers.0.downBias": block.mlp.c_proj.bias,
                "layers.0.attentionNorm": block.ln_1.weight, "layers.0.attentionNormBias": block.ln_1.bias,
                "finalNorm": self.transformer.ln_f.weight, "finalNormBias": self.transformer.ln_f.bias}


# ---- Llama and Qwen2, as transformers.models.llama.modeling_llama and qwen2 ----

def inverse_frequencies(config):
    """transformers' rope initialisation (default, linear, llama3), in float64."""
    inv_freq = 1.0 / (config["rope_theta"] ** (torch.arange(0, HEAD, 2, dtype=torch.float64) / HEAD))
    scaling = config.get("rope_scaling")
    if not scaling:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        return inv_freq / scaling["factor"]
    assert kind == "llama3"
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_wavelength, high_wavelength = old_context / low, old_context / high
    wavelength = 2 * math.pi / inv_freq
    scaled = torch.where(wavelength > low_wavelength, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRMSNorm(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32) if dtype != torch.float64 else x  # float32 at least, as transformers computes it
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class LlamaAttention(nn.Module):
    def __init__(self, config, qkv_bias, o_bias):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD, bias=qkv_bias)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD, bias=qkv_bias)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD, bias=qkv_bias)
        self.o_proj = nn.Linear(HEADS * HEAD, HIDDEN, bias=o_bias)

    def forward(self, x, cos, sin):
        n = x.shape[0]
        query = self.q_proj(x).view(n, HEADS, HEAD).transpose(0, 1)
        key = self.k_proj(x).view(n, KV_HEADS, HEAD).transpose(0, 1)
        value = self.v_proj(x).view(n, KV_HEADS, HEAD).transpose(0, 1)
        query, key = query * cos + rotate_half(query) * sin, key * cos + rotate_half(key) * sin
        # repeat_kv: each key/value head serves HEADS / KV_HEADS consecutive query heads.
        key, value = key.repeat_interleave(HEADS // KV_HEADS, dim=0), value.repeat_interleave(HEADS // KV_HEADS, dim=0)
        return self.o_proj(causal_attention(query, key, value).transpose(0, 1).reshape(n, HEADS * HEAD))


class LlamaMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config, qkv_bias, o_bias):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(config["rms_norm_eps"])
        self.self_attn = LlamaAttention(config, qkv_bias, o_bias)
        self.post_attention_layernorm = LlamaRMSNorm(config["rms_norm_eps"])
        self.mlp = LlamaMLP()

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, config, qkv_bias, o_bias):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCABULARY, HIDDEN)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, qkv_bias, o_bias) for _ in range(config["num_hidden_layers"]))
        self.norm = LlamaRMSNorm(config["rms_norm_eps"])
        self.inv_freq = inverse_frequencies(config)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        freqs = torch.arange(len(ids), dtype=torch.float64)[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config, qkv_bias=False, o_bias=False):
        super().__init__()
        self.model = LlamaModel(config, qkv_bias, o_bias)
        self.tied = config["tie_word_embeddings"]
        if not self.tied:
            self.lm_head = nn.Linear(HIDDEN, VOCABULARY, bias=False)

    def forward(self, ids):
        head = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return self.model(ids) @ head.t()

    def canonical(self):
        layer = self.model.layers[0]
        attention, mlp = layer.self_attn, layer.mlp
        tensors = {"tokenEmbedding": self.model.embed_tokens.weight, "finalNorm": self.model.norm.weight,
                   "layers.0.attentionNorm": layer.input_layernorm.weight, "layers.0.mlpNorm": layer.post_attention_layernorm.weight,
                   "layers.0.query": attention.q_proj.weight, "layers.0.key": attention.k_proj.weight,
                   "layers.0.value": attention.v_proj.weight, "layers.0.output": attention.o_proj.weight,
                   "layers.0.gate": mlp.gate_proj.weight, "layers.0.up": mlp.up_proj.weight, "layers.0.down": mlp.down_proj.weight}
        if attention.q_proj.bias is not None:
            tensors.update({"layers.0.queryBias": attention.q_proj.bias, "layers.0.keyBias": attention.k_proj.bias,
                            "layers.0.valueBias": attention.v_proj.bias})
        if not self.tied:
            tensors["lmHead"] = self.lm_head.weight
        return tensors


# ---- files ----

def safetensors_bytes(tensors, dtype):
    """The safetensors format: u64 header length, the JSON header (keys sorted, padded with spaces so the data starts
    8-byte aligned, as the reference writer does), then each tensor's little-endian bytes in the header's order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        raw = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes() if dtype == "BF16" else \
            t.to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def save(folder, model, config, dtype="F32", shards=1):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    shutil.copyfile(TOKENIZER, os.path.join(folder, "tokenizer.json"))
    state = model.state_dict()
    if shards == 1:
        write(os.path.join(folder, "model.safetensors"), safetensors_bytes(state, dtype))
    else:  # consecutive names per shard, as save_pretrained fills shards in order
        names = list(state)
        per = math.ceil(len(names) / shards)
        weight_map, total = {}, 0
        for i in range(shards):
            file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = {name: state[name] for name in names[i * per:(i + 1) * per]}
            write(os.path.join(folder, file), safetensors_bytes(part, dtype))
            weight_map.update({name: file for name in part})
            total += sum(t.numel() * (2 if dtype == "BF16" else 4) for t in part.values())
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    write(os.path.join(folder, "expected-layers.safetensors"), safetensors_bytes(model.canonical(), "F32"))


def randomize(model, seed, bfloat16, tied):
    """Weights of order 1/sqrt(fan-in), embeddings of order 1, norms near 1, small biases: activations stay of order 1.
    The layers' output projections are 3 times larger, so that the layers and not the token's own embedding decide the
    next token (with tied embeddings a model of small layers repeats its last token), and the lm_head is of order 1, so
    that the logits are peaked."""
    generator = torch.Generator().manual_seed(seed)
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, p in model.named_parameters():
            owner = name.rsplit(".", 1)[0]
            if "norm" in name or owner.split(".")[-1].startswith("ln_"):
                values = (1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=generator)
                if tied and owner in ("model.norm", "transformer.ln_f"):
                    values *= 1 / TIED_EMBEDDING
            elif name.endswith("bias"):
                values = 0.1 * torch.randn(p.shape, generator=generator)
            elif "wte" in name or "wpe" in name or "embed" in name or "lm_head" in name:
                values = torch.randn(p.shape, generator=generator) * (TIED_EMBEDDING if tied and "lm_head" not in name else 1.0)
            else:
                fan_in = p.shape[0] if isinstance(modules[owner], Conv1D) else p.shape[1]
                scale = 3.0 if owner.endswith(("c_proj", "o_proj", "down_proj")) else 1.0
                values = scale * torch.randn(p.shape, generator=generator) / math.sqrt(fan_in)
            p.copy_(values.to(torch.bfloat16).to(torch.float32) if bfloat16 else values)


def expected(folder, model, config, eos):
    model = model.double().eval()
    with torch.no_grad():
        logits = model(torch.tensor(PROMPT))
        np.save(os.path.join(folder, "expected-logits.npy"), logits.numpy())
        ids, greedy, margins = list(PROMPT), [], []
        for _ in range(CONTINUATION):
            last = model(torch.tensor(ids))[-1]
            top = torch.topk(last, 2).values
            token = int(torch.argmax(last))
            greedy.append(token)
            margins.append(float(top[0] - top[1]))
            ids.append(token)
    record = {"prompt": PROMPT, "greedy": greedy, "margins": margins,
              "first_eos": next((i for i, t in enumerate(greedy) if t in eos), None),
              "stored_dtype": config.get("torch_dtype")}
    if hasattr(model, "model"):
        record["inverse_frequencies"] = model.model.inv_freq.tolist()
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(record, f, indent=1)


COMMON = {"attention_dropout": 0.0, "initializer_range": 0.02, "transformers_version": "4.46.0", "use_cache": True}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    torch.manual_seed(0)

    gpt2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.0, "bos_token_id": VOCABULARY - 1,
            "embd_pdrop": 0.0, "eos_token_id": VOCABULARY - 1, "initializer_range": 0.02, "layer_norm_epsilon": 1e-5,
            "model_type": "gpt2", "n_embd": HIDDEN, "n_head": HEADS, "n_inner": None, "n_layer": 2, "n_positions": POSITIONS,
            "reorder_and_upcast_attn": False, "resid_pdrop": 0.0, "scale_attn_by_inverse_layer_idx": False,
            "scale_attn_weights": True, "torch_dtype": "float32", "transformers_version": "4.46.0", "use_cache": True,
            "vocab_size": VOCABULARY}
    model = GPT2LMHeadModel(gpt2)
    randomize(model, 1, False, True)
    save(os.path.join(out, "gpt2"), model, gpt2)
    expected(os.path.join(out, "gpt2"), model, gpt2, [gpt2["eos_token_id"]])

    llama = dict(COMMON, architectures=["LlamaForCausalLM"], attention_bias=False, bos_token_id=1, eos_token_id=2, head_dim=HEAD,
                 hidden_act="silu", hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, max_position_embeddings=POSITIONS,
                 mlp_bias=False, model_type="llama", num_attention_heads=HEADS, num_hidden_layers=3, num_key_value_heads=KV_HEADS,
                 pretraining_tp=1, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, torch_dtype="float32",
                 vocab_size=VOCABULARY,
                 rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                               "original_max_position_embeddings": 32, "rope_type": "llama3"})
    model = LlamaForCausalLM(llama)
    randomize(model, 2, False, False)
    save(os.path.join(out, "llama"), model, llama, shards=2)
    expected(os.path.join(out, "llama"), model, llama, [llama["eos_token_id"]])

    qwen2 = dict(COMMON, architectures=["Qwen2ForCausalLM"], bos_token_id=VOCABULARY - 3, eos_token_id=[VOCABULARY - 2, VOCABULARY - 1],
                 hidden_act="silu", hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, max_position_embeddings=POSITIONS,
                 max_window_layers=2, model_type="qwen2", num_attention_heads=HEADS, num_hidden_layers=2,
                 num_key_value_heads=KV_HEADS, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=1000000.0, sliding_window=POSITIONS,
                 tie_word_embeddings=True, torch_dtype="bfloat16", use_sliding_window=False, vocab_size=VOCABULARY)
    model = LlamaForCausalLM(qwen2, qkv_bias=True)
    randomize(model, 3, True, True)
    save(os.path.join(out, "qwen2"), model, qwen2, dtype="BF16")
    expected(os.path.join(out, "qwen2"), model, qwen2, qwen2["eos_token_id"])


if __name__ == "__main__":
    main()
