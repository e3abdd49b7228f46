/**
 * LoRA adapters (Hu et al. 2021) as PEFT defines them: a projection y = x·Wᵀ + b gains (alpha/rank)·dropout(x)·Aᵀ·Bᵀ
 * with A [rank, in] and B [out, rank], A drawn like PEFT's kaiming-uniform(a=√5) (uniform in ±1/√in) and B zero, so a
 * fresh adapter leaves the model unchanged. The base weights stay frozen; only A and B are trained. GPT-2's Conv1D
 * projections get the same A and B shapes (PEFT's fan_in_fan_out only changes how the product is merged).
 */
import { defaultBackend } from '../backend/select.js';
import { bf16ToF32 } from '../tensor/half.js';
import type { Ctx } from '../tensor/tape.js';
import { Tensor } from '../tensor/tensor.js';
import { Rng } from '../util/rng.js';
import { checkFinite } from './finite.js';
import type { Family, TransformerConfig } from './hf-config.js';
import { hfWeightNames } from './weight-names.js';

/** The projections of Llama, Qwen2 and Qwen3 blocks, as PEFT's target_modules name them. */
export const LLAMA_LORA_TARGETS = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
] as const;
/** The Conv1D projections of GPT-2 blocks, as PEFT's target_modules name them. */
export const GPT2_LORA_TARGETS = ['c_attn', 'c_proj', 'c_fc'] as const;
/** Every projection name a config may list. */
export const LORA_TARGET_NAMES = [...LLAMA_LORA_TARGETS, ...GPT2_LORA_TARGETS] as const;
/** PEFT's shorthand for every linear projection of the blocks (the language-model head excluded). */
export const ALL_LINEAR = 'all-linear';

/** How an agent's adapters are shaped: PEFT's r, lora_alpha, lora_dropout and target_modules. */
export interface LoraSettings {
  /** r, the inner dimension of each adapter. */
  rank: number;
  /** lora_alpha: the update is scaled by alpha / rank. */
  alpha: number;
  /** lora_dropout: probability of zeroing an input element of the adapter path during training (0 = off). */
  dropout: number;
  /** Adapted projections by their PEFT names, or 'all-linear' (alone or as the one entry of the list). */
  targets: readonly string[] | typeof ALL_LINEAR;
}

/** The projection names of a family's blocks. */
export function familyTargets(family: Family): readonly string[] {
  return family === 'gpt2' ? GPT2_LORA_TARGETS : LLAMA_LORA_TARGETS;
}

/** One adapted projection: its module path (the parameter name without `.weight`) and its widths. */
export interface AdaptedModule {
  module: string;
  inF: number;
  outF: number;
}

/**
 * Whether `target` names `module` by PEFT's rule for a list of target_modules: the module's full name, or a suffix of
 * it after a dot (`q_proj`, `self_attn.q_proj`, `model.layers.0.self_attn.q_proj`). PEFT saves 'all-linear' as the
 * full names of the modules it adapted, so an adapter folder written by PEFT names them that way.
 */
const names = (module: string, target: string): boolean => module === target || module.endsWith(`.${target}`);

/** The projection name of a module path (`q_proj` of `model.layers.0.self_attn.q_proj`). */
export const projectionName = (module: string): string => module.slice(module.lastIndexOf('.') + 1);

/**
 * The modules the settings adapt in this model, in state_dict order. Throws saying what to change when a target names
 * no projection of the family's blocks or the rank exceeds a projection's smaller width.
 */
export function adaptedModules(cfg: TransformerConfig, s: LoraSettings): AdaptedModule[] {
  const all = s.targets === ALL_LINEAR || s.targets.includes(ALL_LINEAR);
  const known = familyTargets(cfg.family);
  const projections: AdaptedModule[] = [];
  for (const w of hfWeightNames(cfg)) {
    if (w.layer === null || w.shape.length !== 2 || !w.name.endsWith('.weight')) continue;
    const module = w.name.slice(0, -'.weight'.length);
    if (!known.includes(projectionName(module))) continue;
    const [outF, inF] = w.transposed ? [w.shape[1]!, w.shape[0]!] : [w.shape[0]!, w.shape[1]!];
    projections.push({ module, inF, outF });
  }
  const targets = all ? [] : (s.targets as readonly string[]);
  const wrong = targets.filter((t) => !projections.some((p) => names(p.module, t)));
  if (wrong.length > 0)
    throw new Error(
      `lora.targets ${wrong.join(', ')} are not projections of a ${cfg.family} model: use ` +
        `${known.join(', ')}, full module names such as ${projections[0]?.module} ` +
        `(or '${ALL_LINEAR}')`,
    );
  if (!(Number.isInteger(s.rank) && s.rank >= 1))
    throw new Error(`lora.rank must be a whole number ≥ 1, got ${s.rank}`);
  if (!(s.dropout >= 0 && s.dropout < 1)) throw new Error(`lora.dropout must be in [0, 1), got ${s.dropout}`);
  const out = projections.filter((p) => all || targets.some((t) => names(p.module, t)));
  for (const { module, inF, outF } of out)
    if (s.rank > Math.min(inF, outF))
      throw new Error(
        `lora.rank ${s.rank} exceeds the smaller width (${Math.min(inF, outF)}) of ${module} [out ${outF}, in ` +
          `${inF}]: choose a rank of at most ${Math.min(inF, outF)}`,
      );
  return out;
}

/** The names of a module's A and B parameters (PEFT's, without the `base_model.model.` prefix). */
export function loraParamNames(module: string): { a: string; b: string } {
  return { a: `${module}.lora_A.weight`, b: `${module}.lora_B.weight` };
}

/** The trainable adapters of one model. */
export class LoraAdapters {
  /** The adapted modules, in state_dict order. */
  readonly modules: readonly AdaptedModule[];
  /** A [rank, in] and B [out, rank] of every adapted module, by loraParamNames. */
  readonly params: Map<string, Tensor>;
  /** alpha / rank. */
  readonly scale: number;
  /** Draws the dropout masks (training passes only); its state is part of a run's checkpoint. */
  rng: Rng;
  private readonly byModule: Map<string, { a: Tensor; b: Tensor }>;

  /**
   * Adapters over `params` (checked: every module's A and B present with their shapes, nothing else). `base` names
   * the frozen model they apply to (PEFT's base_model_name_or_path).
   */
  constructor(
    readonly cfg: TransformerConfig,
    readonly settings: LoraSettings,
    params: Map<string, Tensor>,
    readonly base: string,
    rng: Rng = new Rng(0),
  ) {
    this.modules = adaptedModules(cfg, settings);
    this.scale = settings.alpha / settings.rank;
    this.rng = rng;
    this.byModule = new Map();
    const { rank } = settings;
    for (const m of this.modules) {
      const names = loraParamNames(m.module);
      const a = params.get(names.a);
      const b = params.get(names.b);
      const check = (t: Tensor | undefined, name: string, shape: number[]): Tensor => {
        if (!t) throw new Error(`missing LoRA tensor "${name}" (expected shape [${shape.join(', ')}])`);
        if (t.shape.length !== 2 || t.shape[0] !== shape[0] || t.shape[1] !== shape[1])
          throw new Error(`LoRA tensor "${name}" has shape [${t.shape.join(', ')}], rank ${rank} needs [${shape}]`);
        return t;
      };
      this.byModule.set(m.module, { a: check(a, names.a, [rank, m.inF]), b: check(b, names.b, [m.outF, rank]) });
    }
    for (const name of params.keys())
      if (![...this.byModule.keys()].some((m) => name === `${m}.lora_A.weight` || name === `${m}.lora_B.weight`))
        throw new Error(`unexpected LoRA tensor "${name}" for targets ${JSON.stringify(settings.targets)}`);
    this.params = params;
  }

  /** Fresh adapters: A as PEFT initialises it (uniform in ±1/√in, drawn from `seed`), B zero. */
  static init(cfg: TransformerConfig, settings: LoraSettings, base: string, seed: number): LoraAdapters {
    const rng = new Rng(seed);
    const params = new Map<string, Tensor>();
    for (const m of adaptedModules(cfg, settings)) {
      const names = loraParamNames(m.module);
      // kaiming_uniform_(a=√5): gain √(2/(1+5)), bound gain·√(3/fan_in) = 1/√fan_in.
      const bound = 1 / Math.sqrt(m.inF);
      const a = new Float32Array(settings.rank * m.inF);
      for (let i = 0; i < a.length; i++) a[i] = (2 * rng.next() - 1) * bound;
      params.set(names.a, new Tensor(a, [settings.rank, m.inF], true));
      params.set(names.b, Tensor.zeros([m.outF, settings.rank], true));
    }
    return new LoraAdapters(cfg, settings, params, base, new Rng(seed + 1));
  }

  /**
   * y plus the adapter's update s·dropout(x)·Aᵀ·Bᵀ of the projection `module` on input x (s = alpha/rank), or y
   * unchanged when the module is not adapted. Dropout applies on the tape only (training), with a mask from `rng`,
   * scaled by 1/(1 − p) as nn.Dropout does.
   * One op rather than four (product, scale, product, sum): the update is added into y's own buffer (no backward
   * reads a projection's output values) and the backward keeps only the [rows, rank] down product and the dropout
   * mask, where separate ops would hold three more [rows, out] buffers and their gradients per projection.
   */
  apply(ctx: Ctx, x: Tensor, module: string, y: Tensor): Tensor {
    const ab = this.byModule.get(module);
    if (!ab) return y;
    const { a, b } = ab;
    const { k } = ctx;
    const r = this.settings.rank;
    const [outF, inF] = [b.shape[0]!, a.shape[1]!];
    const rows = x.rows;
    const s = this.scale;
    const track = ctx.tape !== null && (x.requiresGrad || y.requiresGrad || a.requiresGrad || b.requiresGrad);
    const mask = ctx.tape !== null ? this.dropoutMask(x.size) : null;
    const input = (): Float32Array => (mask ? masked(x.data, mask, 1 / (1 - this.settings.dropout)) : x.data);
    const down = track ? ctx.tape!.buffer(rows * r) : (ctx.arena?.buffer(rows * r) ?? new Float32Array(rows * r));
    k.gemm({ transB: true, m: rows, n: r, k: inF, a: { data: input() }, b: { data: a.data }, c: { data: down } });
    k.gemm({
      transB: true,
      m: rows,
      n: outF,
      k: r,
      alpha: s,
      beta: 1,
      a: { data: down },
      b: { data: b.data },
      c: { data: y.data },
    });
    if (!track) return y;
    // A tracked y already has its gradient buffer on the tape; an untracked one (frozen base on an input without
    // gradients: the first layer) becomes a tracked tensor over the same buffer.
    const out = y.requiresGrad ? y : new Tensor(y.data, y.shape, true);
    ctx.tape!.record(
      () => {
        const dy = out.grad;
        if (!dy) return;
        if (b.requiresGrad)
          k.gemm({
            transA: true,
            m: outF,
            n: r,
            k: rows,
            alpha: s,
            beta: 1,
            a: { data: dy },
            b: { data: down },
            c: { data: b.ensureGrad() },
          });
        const dDown = new Float32Array(rows * r);
        k.gemm({ m: rows, n: r, k: outF, alpha: s, a: { data: dy }, b: { data: b.data }, c: { data: dDown } });
        if (a.requiresGrad)
          k.gemm({
            transA: true,
            m: r,
            n: inF,
            k: rows,
            beta: 1,
            a: { data: dDown },
            b: { data: input() },
            c: { data: a.ensureGrad() },
          });
        if (!x.requiresGrad) return;
        if (!mask) {
          k.gemm({
            m: rows,
            n: inF,
            k: r,
            beta: 1,
            a: { data: dDown },
            b: { data: a.data },
            c: { data: x.ensureGrad() },
          });
          return;
        }
        const dIn = new Float32Array(rows * inF);
        k.gemm({ m: rows, n: inF, k: r, a: { data: dDown }, b: { data: a.data }, c: { data: dIn } });
        k.axpy(1, masked(dIn, mask, 1 / (1 - this.settings.dropout)), x.ensureGrad(), dIn.length);
      },
      y.requiresGrad ? undefined : out,
    );
    return out;
  }

  /** A training pass's keep-mask of n inputs (1 kept, 0 dropped) drawn from `rng`, or null without dropout. */
  private dropoutMask(n: number): Uint8Array | null {
    const p = this.settings.dropout;
    if (p === 0) return null;
    const mask = new Uint8Array(n);
    for (let i = 0; i < n; i++) mask[i] = this.rng.next() < p ? 0 : 1;
    return mask;
  }

  /**
   * Adds (alpha/rank)·(B·A)ᵀ into every adapted weight's [in, out] inference copy, found by `locate` (array, leading
   * dimension, offset): the copies then hold the merged weights without a merged copy of the base beside them.
   */
  addToCopies(locate: (name: string, outF: number) => { data: Float32Array; ld: number; offset: number }): void {
    for (const m of this.modules) this.addUpdate(m, locate(`${m.module}.weight`, m.outF), true);
  }

  /**
   * Adds (alpha/rank)·B·A of `module` into its weight `w`, stored [out, in], or `transposed` [in, out] (GPT-2's Conv1D
   * as checkpoints hold it): a merge that streams a checkpoint one weight at a time.
   */
  addToWeight(module: string, w: Float32Array, transposed: boolean): void {
    const m = this.modules.find((x) => x.module === module);
    if (!m) throw new Error(`module "${module}" has no adapter`);
    this.addUpdate(m, { data: w }, transposed);
  }

  /**
   * Adds (alpha/rank)·B·A of module `m` into `c`: a [out, in] weight, or `transposed` an [in, out] inference copy
   * (then Aᵀ [in, r] · Bᵀ [r, out], both read transposed from their stored [r, in] and [out, r]).
   */
  private addUpdate(
    m: AdaptedModule,
    c: { data: Float32Array; ld?: number; offset?: number },
    transposed: boolean,
  ): void {
    const { a, b } = this.byModule.get(m.module)!;
    const product = transposed
      ? { transA: true, transB: true, m: m.inF, n: m.outF, a: { data: a.data }, b: { data: b.data } }
      : { m: m.outF, n: m.inF, a: { data: b.data }, b: { data: a.data } };
    defaultBackend().gemm({ ...product, k: this.settings.rank, alpha: this.scale, beta: 1, c });
  }

  /**
   * The base parameters with every adapted weight replaced by W + (alpha/rank)·B·A (new float32 arrays, also for a
   * base stored as bfloat16; the rest shared): what a merged checkpoint holds.
   */
  merged(params: ReadonlyMap<string, Tensor>): Map<string, Tensor> {
    const out = new Map(params);
    for (const m of this.modules) {
      const name = `${m.module}.weight`;
      out.set(name, new Tensor(this.mergedWeight(m, params.get(name)!), params.get(name)!.shape));
    }
    return out;
  }

  /**
   * Throws naming the weight and `source` when a merged weight W + (alpha/rank)·B·A is NaN or infinite: finite
   * adapters on a finite base can still overflow, and would then be served or exported as infinities. One adapted
   * weight at a time, so the check holds no merged copy of the model.
   */
  checkMergedFinite(params: ReadonlyMap<string, Tensor>, source: string): void {
    for (const m of this.modules) {
      const name = `${m.module}.weight`;
      checkFinite(name, this.mergedWeight(m, params.get(name)!), `${source} (merged with its base)`);
    }
  }

  /** W + (alpha/rank)·B·A of one adapted module, as a new float32 array (also for a base stored as bfloat16). */
  private mergedWeight(m: AdaptedModule, w: Tensor): Float32Array {
    const c = w.bf16 ? bf16ToF32(w.bf16) : w.data.slice();
    this.addUpdate(m, { data: c }, false);
    return c;
  }
}

/** The same parameters frozen: tensors sharing the data, with no gradients (a LoRA agent's base). */
export function frozen(params: ReadonlyMap<string, Tensor>): Map<string, Tensor> {
  return new Map([...params].map(([n, t]) => [n, t.requiresGrad ? new Tensor(t.data, t.shape, false) : t]));
}

/** values·keep·scale elementwise (dropout's kept inputs, scaled), as a new array. */
function masked(values: Float32Array, keep: Uint8Array, scale: number): Float32Array {
  const out = new Float32Array(values.length);
  for (let i = 0; i < out.length; i++) out[i] = keep[i] ? values[i]! * scale : 0;
  return out;
}
