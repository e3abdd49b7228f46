"""The PEFT side of bench/peft-interop.ts: for each family folder under ROOT (base/, adapter/ and merged/ written by
hacrl, hacrl.json with the input ids and hacrl's logits), prints as JSON the relative error of transformers' and PEFT's
logits against hacrl's, and writes peft-adapter/ (PEFT's own adapter, random A and B) with its logits in peft.json.

usage: python3 peft_interop.py ROOT FAMILY[,FAMILY...]
"""

import json
import os
import sys

import peft
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM


def rel_error(got, want):
    """max |got - want| / max |want|, as the Node side's relError."""
    want = torch.tensor(want, dtype=torch.float64)
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()


def main(root, families):
    torch.manual_seed(0)
    out = {"versions": {"text": f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}"}}
    for family in families:
        d = os.path.join(root, family)
        with open(os.path.join(d, "hacrl.json")) as f:
            h = json.load(f)
        ids = torch.tensor(h["ids"]).view(h["batch"], h["seq"])

        def logits(model):
            with torch.no_grad():
                return model(input_ids=ids).logits.reshape(-1)

        def base():
            return AutoModelForCausalLM.from_pretrained(os.path.join(d, "base"), dtype=torch.float32).eval()

        row = {"base in transformers": rel_error(logits(base()), h["base"])}
        ours = PeftModel.from_pretrained(base(), os.path.join(d, "adapter")).eval()
        row["our adapter in PEFT"] = rel_error(logits(ours), h["adapted"])
        row["PEFT merge_and_unload"] = rel_error(logits(ours.merge_and_unload()), h["adapted"])
        merged = AutoModelForCausalLM.from_pretrained(os.path.join(d, "merged"), dtype=torch.float32).eval()
        row["our merged folder"] = rel_error(logits(merged), h["adapted"])
        # init_lora_weights=False draws B at random too (the default B = 0 would leave the base's logits).
        config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False, task_type="CAUSAL_LM")
        theirs = get_peft_model(base(), config).eval()
        theirs.save_pretrained(os.path.join(d, "peft-adapter"))
        with open(os.path.join(d, "peft.json"), "w") as f:
            json.dump({"logits": logits(theirs).tolist()}, f)
        out[family] = row
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","))
