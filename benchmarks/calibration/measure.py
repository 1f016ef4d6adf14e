"""Ground-truth peak GPU memory and throughput of real transformer training steps.

Each case runs in its own process (fresh CUDA allocator). A case builds a randomly
initialised Llama/Qwen-shaped causal LM from its config (no download), runs a few
AdamW training steps on random tokens, and records peak allocated/reserved memory
and tokens/s. Results are the hidden reference set for the project's memory and
time estimators.

usage: python measure.py [--cpu-smoke] [--heldout] OUT.json

trainstack copy of ../shared/reference/calibration/measure.py (the script behind the calibration
rows). Changes: HELDOUT cases (shapes and settings the constants were never fitted on, run with
--heldout), and per-phase peaks of the last step (forward, backward, optimizer) recorded beside
the unchanged overall peak, to see which phase holds it.
"""
import json
import subprocess
import sys
import time

ARCH = {
    # name: hidden, layers, heads, kv_heads, intermediate, vocab, tied
    "llama-3.2-1b": (2048, 16, 32, 8, 8192, 128256, True),
    "llama-3.2-3b": (3072, 28, 24, 8, 8192, 128256, True),
    "llama-3-8b": (4096, 32, 32, 8, 14336, 128256, False),
    "qwen2.5-0.5b": (896, 24, 14, 2, 4864, 151936, True),
    "qwen2.5-1.5b": (1536, 28, 12, 2, 8960, 151936, True),
    "mistral-7b": (4096, 32, 32, 8, 14336, 32768, False),
    "tiny": (128, 2, 4, 2, 256, 1000, True),
}

# id, arch, method, precision, batch, seq, grad_ckpt, lora_r, lora_targets
CASES = [
    ("c01", "llama-3.2-1b", "full", "amp-fp32-master", 8, 1024, False, 0, None),
    ("c02", "llama-3.2-1b", "full", "amp-fp32-master", 8, 1024, True, 0, None),
    ("c03", "llama-3.2-1b", "full", "pure-bf16", 8, 1024, False, 0, None),
    ("c04", "llama-3.2-3b", "full", "amp-fp32-master", 4, 2048, True, 0, None),
    ("c05", "llama-3.2-3b", "lora", "pure-bf16", 4, 2048, False, 16, "all-linear"),
    ("c06", "llama-3-8b", "lora", "pure-bf16", 2, 2048, True, 16, "attn"),
    ("c07", "llama-3-8b", "lora", "pure-bf16", 4, 4096, True, 64, "all-linear"),
    ("c08", "llama-3-8b", "full", "pure-bf16", 1, 2048, True, 0, None),
    ("c09", "qwen2.5-0.5b", "full", "amp-fp32-master", 8, 2048, False, 0, None),
    ("c10", "llama-3.2-1b", "lora", "pure-bf16", 32, 512, False, 8, "attn"),
    ("c11", "llama-3.2-3b", "full", "amp-fp32-master", 2, 4096, False, 0, None),
    ("c12", "llama-3-8b", "lora", "pure-bf16", 8, 1024, False, 16, "all-linear"),
]
# held out: never used to fit a constant
HELDOUT = [
    ("h01", "qwen2.5-1.5b", "full", "pure-bf16", 4, 2048, False, 0, None),
    ("h02", "llama-3.2-1b", "full", "amp-fp32-master", 4, 2048, True, 0, None),
    ("h03", "llama-3.2-3b", "lora", "pure-bf16", 2, 2048, False, 64, "attn"),
    ("h04", "mistral-7b", "lora", "pure-bf16", 4, 2048, True, 16, "all-linear"),
    ("h05", "mistral-7b", "full", "pure-bf16", 2, 1024, True, 0, None),
    ("h06", "qwen2.5-0.5b", "full", "amp-fp32-master", 16, 1024, True, 0, None),
    ("h07", "llama-3.2-1b", "full", "amp-fp32-master", 2, 4096, False, 0, None),
    ("h08", "llama-3.2-3b", "full", "pure-bf16", 2, 2048, False, 0, None),
]
SMOKE = [
    ("s01", "tiny", "full", "amp-fp32-master", 2, 64, False, 0, None),
    ("s02", "tiny", "lora", "pure-bf16", 2, 64, True, 8, "all-linear"),
]

CHILD = r'''
import json, sys, time, torch
from transformers import LlamaConfig, LlamaForCausalLM
case = json.loads(sys.argv[1]); arch = json.loads(sys.argv[2]); dev = sys.argv[3]
cid, name, method, precision, batch, seq, gc, r, targets = case
hidden, layers, heads, kv, inter, vocab, tied = arch
cfg = LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv, intermediate_size=inter, vocab_size=vocab,
                  tie_word_embeddings=tied, max_position_embeddings=max(seq, 4096))
cfg._attn_implementation = "sdpa"
dtype = torch.float32 if precision == "amp-fp32-master" else torch.bfloat16
if method == "lora":
    dtype = torch.bfloat16
torch.manual_seed(0)
with torch.device(dev):
    model = LlamaForCausalLM(cfg).to(dtype)
n_params = sum(p.numel() for p in model.parameters())
if gc:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
if method == "lora":
    from peft import LoraConfig, get_peft_model
    tm = ["q_proj", "k_proj", "v_proj", "o_proj"] if targets == "attn" else "all-linear"
    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=tm, lora_dropout=0.0))
    if gc:
        model.enable_input_require_grads()
trainable = [p for p in model.parameters() if p.requires_grad]
n_train = sum(p.numel() for p in trainable)
opt = torch.optim.AdamW(trainable, lr=1e-5, fused=(dev == "cuda"))
model.train()
ids = torch.randint(0, vocab, (batch, seq), device=dev)
if dev == "cuda":
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
static = torch.cuda.memory_allocated() if dev == "cuda" else 0
times = []
steps = 4
phase = {}
for i in range(steps):
    last = dev == "cuda" and i == steps - 1
    if last:
        phase["before_last"] = torch.cuda.max_memory_allocated()
        phase["reserved_before_last"] = torch.cuda.max_memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    if precision == "amp-fp32-master" and method == "full":
        with torch.autocast(dev, dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
    else:
        out = model(input_ids=ids, labels=ids)
    if last:
        phase["after_forward"] = torch.cuda.memory_allocated()
        phase["forward"] = torch.cuda.max_memory_allocated(); torch.cuda.reset_peak_memory_stats()
    out.loss.backward()
    if last:
        phase["backward"] = torch.cuda.max_memory_allocated(); torch.cuda.reset_peak_memory_stats()
    opt.step(); opt.zero_grad(set_to_none=True)
    if last:
        phase["optimizer"] = torch.cuda.max_memory_allocated()
    if dev == "cuda":
        torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
res = {"id": cid, "arch": name, "method": method, "precision": precision, "batch": batch,
       "seq": seq, "grad_ckpt": gc, "lora_r": r, "lora_targets": targets,
       "params": n_params, "trainable_params": n_train, "weights_and_static_bytes": static,
       "step_seconds": times, "tokens_per_s": batch * seq / min(times[1:])}
if dev == "cuda":
    res["peak_allocated_bytes"] = max(phase["before_last"], phase["forward"], phase["backward"],
                                      phase["optimizer"])
    res["peak_reserved_bytes"] = max(phase["reserved_before_last"], torch.cuda.max_memory_reserved())
    res["phase_peaks_last_step"] = phase
    res["gpu"] = torch.cuda.get_device_name()
print("RESULT " + json.dumps(res))
'''


def main():
    args = sys.argv[1:]
    smoke = "--cpu-smoke" in args
    out = [a for a in args if not a.startswith("--")][0]
    cases, dev = (SMOKE, "cpu") if smoke else ((HELDOUT if "--heldout" in args else CASES), "cuda")
    results = []
    for case in cases:
        t0 = time.time()
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case), json.dumps(ARCH[case[1]]), dev],
                           capture_output=True, text=True, timeout=240)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if line:
            r = json.loads(line[0][7:])
        else:
            r = {"id": case[0], "error": (p.stderr or p.stdout)[-1500:]}
        r["wall_s"] = round(time.time() - t0, 1)
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "step_seconds"}), flush=True)
        with open(out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
