/**
 * The four families against an independent PyTorch implementation (test/torch/reference_model.py run with Debian's
 * python3-torch): logits and the gradient of a weighted log-likelihood w.r.t. every parameter, on every backend.
 *
 * Tolerances: logits by max absolute difference (< 1e-4) over the rows that hold a real token (a left-padding query
 * sees no key, and what it outputs is implementation-defined); gradients per parameter tensor by max|Δ| / max|g_torch|
 * (< 1e-4), i.e. relative to the largest gradient entry of that tensor.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { Engine } from '../src/backend/engine.js';
import { Transformer } from '../src/model/transformer.js';
import { loadModel, saveModel, tensorsForCheckpoint } from '../src/model/weights.js';
import { Tape } from '../src/tensor/tape.js';
import { Tensor } from '../src/tensor/tensor.js';
import { testedBackends } from './backends.js';
import { mulberry32, randInt, relError, uniform } from './helpers.js';
import { requireTorch, runTorchReference } from './torch-reference.js';
import { CONFIGS, testModel, VOCAB } from './tiny-models.js';

const LOGIT_TOL = 1e-4;
const GRAD_TOL = 1e-4;

const BATCH = 2;
const SEQ = 7;
/** Row 1 is left-padded by two tokens. */
const KEY_START = Int32Array.of(0, 2);
const PAD_ID = 0;

/** The batch both sides run: random tokens, padding before KEY_START, next-token targets and signed weights. */
interface Inputs {
  ids: Int32Array;
  targets: Int32Array;
  weights: Float32Array;
}

/** Draws the inputs from `seed`; padding rows get no target and weight 0. */
function makeInputs(seed: number): Inputs {
  const rng = mulberry32(seed);
  const ids = randInt(BATCH * SEQ, rng, 1, VOCAB);
  const last = randInt(BATCH, rng, 0, VOCAB);
  const weights = uniform(BATCH * SEQ, rng, -1, 1);
  const targets = new Int32Array(BATCH * SEQ);
  for (let b = 0; b < BATCH; b++) {
    for (let t = 0; t < SEQ; t++) {
      const r = b * SEQ + t;
      if (t < KEY_START[b]!) {
        ids[r] = PAD_ID;
        targets[r] = -1;
        weights[r] = 0;
      } else targets[r] = t + 1 < SEQ ? ids[r + 1]! : last[b]!;
    }
  }
  return { ids, targets, weights };
}

/** [B][T] nested arrays of a row-major [B·T] array, for the JSON input. */
function nested(a: ArrayLike<number>): number[][] {
  return Array.from({ length: BATCH }, (_, b) => Array.from({ length: SEQ }, (_, t) => a[b * SEQ + t]!));
}

/** Logits and gradients by checkpoint name, in Hugging Face layouts. */
interface Result {
  logits: Float32Array;
  grads: Map<string, Float32Array>;
}

/** Runs the PyTorch reference on the checkpoint in `dir`. */
async function torchReference(dir: string, inputs: Inputs): Promise<Result> {
  const input = join(dir, 'input.json');
  const output = join(dir, 'torch.safetensors');
  const json = {
    ids: nested(inputs.ids),
    key_start: [...KEY_START],
    targets: nested(inputs.targets),
    weights: nested(inputs.weights),
  };
  const tensors = await runTorchReference(join(dir, 'model'), json, input, output);
  const grads = new Map<string, Float32Array>();
  let logits: Float32Array | undefined;
  for (const [name, t] of tensors) {
    assert.ok(t.data instanceof Float32Array, `${name} is float32`);
    if (name === 'logits') logits = t.data;
    else grads.set(name, t.data);
  }
  assert.ok(logits, 'the reference wrote logits');
  return { logits, grads };
}

/** hacrl's logits and parameter gradients for the checkpoint in `dir`, computed on `engine`. */
async function hacrlResult(dir: string, engine: Engine, inputs: Inputs): Promise<Result> {
  const model = await loadModel(join(dir, 'model'));
  const batch = { ids: inputs.ids, batch: BATCH, seqLen: SEQ, keyStart: KEY_START };
  const hidden = model.forward({ k: engine, tape: null }, batch);
  const logits = model.logits(engine, hidden.data, BATCH * SEQ);
  const tape = new Tape();
  const { logProb } = model.tokenLogProbs({ k: engine, tape }, batch, inputs.targets);
  // Seeding backward with the weights gives d(Σ weights · logProb).
  tape.backward(logProb, inputs.weights);
  // The gradients in checkpoint layout: the same transposition as saving (GPT-2's Conv1D weights are [in, out]).
  const gradParams = new Map<string, Tensor>();
  for (const [name, p] of model.params) gradParams.set(name, new Tensor(p.grad ?? new Float32Array(p.size), p.shape));
  const grads = new Map(
    tensorsForCheckpoint(new Transformer(model.cfg, gradParams)).map(([name, t]) => [name, t.data]),
  );
  return { logits, grads };
}

/** Max |a − b| over the rows that hold real tokens (t ≥ keyStart), each row `width` wide. */
function maxLogitDiff(a: Float32Array, b: Float32Array, width: number): number {
  let worst = 0;
  for (let r = 0; r < BATCH * SEQ; r++) {
    if (r % SEQ < KEY_START[Math.floor(r / SEQ)]!) continue;
    for (let v = r * width; v < (r + 1) * width; v++) worst = Math.max(worst, Math.abs(a[v]! - b[v]!));
  }
  return worst;
}

const root = await mkdtemp(join(tmpdir(), 'hacrl-torch-'));
after(() => rm(root, { recursive: true, force: true }));

describe('model vs PyTorch (logits and gradients)', () => {
  for (const [i, [family, json]] of Object.entries(CONFIGS).entries()) {
    const inputs = makeInputs(100 + i);
    let reference: Promise<Result> | undefined;
    /** Saves the model and runs PyTorch on it once per family, shared by the backends. */
    const prepare = (): Promise<Result> =>
      (reference ??= (async () => {
        requireTorch();
        const dir = join(root, family);
        await saveModel(join(dir, 'model'), testModel(json, 10 + i));
        return torchReference(dir, inputs);
      })());

    for (const backend of testedBackends(family)) {
      test(`${family} on ${backend.name}`, async (t) => {
        const want = await prepare();
        const got = await hacrlResult(join(root, family), new Engine(backend), inputs);
        const logitDiff = maxLogitDiff(got.logits, want.logits, VOCAB);
        assert.deepEqual([...got.grads.keys()].sort(), [...want.grads.keys()].sort(), 'the same parameters');
        let [worstGrad, worstName, worstAbs] = [0, '', 0];
        for (const [name, g] of got.grads) {
          const w = want.grads.get(name)!;
          const err = relError(g, w);
          if (err >= worstGrad) [worstGrad, worstName] = [err, name];
          for (let j = 0; j < g.length; j++) worstAbs = Math.max(worstAbs, Math.abs(g[j]! - w[j]!));
        }
        t.diagnostic(
          `logits max abs diff ${logitDiff.toExponential(2)}; grads max rel diff ${worstGrad.toExponential(2)} ` +
            `(${worstName}), max abs diff ${worstAbs.toExponential(2)}`,
        );
        assert.ok(logitDiff < LOGIT_TOL, `logits differ by ${logitDiff.toExponential(3)} (tolerance ${LOGIT_TOL})`);
        assert.ok(
          worstGrad < GRAD_TOL,
          `gradient of ${worstName}: relative difference ${worstGrad.toExponential(3)} (tolerance ${GRAD_TOL})`,
        );
      });
    }
  }
});
