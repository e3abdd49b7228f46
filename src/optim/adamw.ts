import type { Kernels } from '../backend/kernels.js';
import type { Tensor } from '../tensor/tensor.js';

/** AdamW hyper-parameters. */
export interface AdamWOptions {
  /** Learning rate (per step; schedules pass their own to step()); default 1e-3. */
  lr?: number;
  /** First-moment decay β1; default 0.9. */
  beta1?: number;
  /** Second-moment decay β2; default 0.999. */
  beta2?: number;
  /** Denominator epsilon; default 1e-8. */
  eps?: number;
  /** Decoupled weight decay per step, scaled by lr; default 0.01. */
  weightDecay?: number;
  /** Which parameters decay; default: matrices only (not biases or norm scales, as Hugging Face's Trainer does). */
  decays?: (name: string, param: Tensor) => boolean;
}

/** Saved optimizer state: enough to continue bit for bit. */
export interface AdamWState {
  step: number;
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
}

/** AdamW over named parameters (PyTorch's formulation, one fused kernel per tensor). */
export class AdamW {
  private readonly params: Map<string, Tensor>;
  private readonly o: Required<Omit<AdamWOptions, 'decays'>>;
  private readonly decays: (name: string, param: Tensor) => boolean;
  private m = new Map<string, Float32Array>();
  private v = new Map<string, Float32Array>();
  /** Optimizer steps taken so far. */
  stepCount = 0;

  constructor(params: Map<string, Tensor>, options: AdamWOptions = {}) {
    this.params = params;
    this.o = {
      lr: options.lr ?? 1e-3,
      beta1: options.beta1 ?? 0.9,
      beta2: options.beta2 ?? 0.999,
      eps: options.eps ?? 1e-8,
      weightDecay: options.weightDecay ?? 0.01,
    };
    this.decays = options.decays ?? ((_, p) => p.shape.length >= 2);
  }

  /** One update of every parameter that has a gradient, at learning rate `lr` (default: the configured one). */
  step(k: Kernels, lr = this.o.lr): void {
    this.stepCount++;
    for (const [name, p] of this.params) {
      const g = p.grad;
      if (!g) continue;
      let m = this.m.get(name);
      let v = this.v.get(name);
      if (!m || !v) {
        m = new Float32Array(p.size);
        v = new Float32Array(p.size);
        this.m.set(name, m);
        this.v.set(name, v);
      }
      const wd = this.decays(name, p) ? this.o.weightDecay : 0;
      k.adamw(p.data, g, m, v, p.size, lr, this.o.beta1, this.o.beta2, this.o.eps, wd, this.stepCount);
    }
  }

  /** Zeroes every parameter's gradient. */
  zeroGrad(): void {
    for (const p of this.params.values()) p.zeroGrad();
  }

  /** The moment estimates and step count (shared buffers; copy before mutating). */
  state(): AdamWState {
    return { step: this.stepCount, m: this.m, v: this.v };
  }

  /** Restores a saved state; every moment must match its parameter's size. */
  load(state: AdamWState): void {
    for (const [name, m] of state.m) {
      const p = this.params.get(name);
      if (!p) throw new Error(`optimizer state names unknown parameter "${name}"`);
      if (m.length !== p.size || state.v.get(name)?.length !== p.size)
        throw new Error(`optimizer state of "${name}" has ${m.length} elements, the parameter has ${p.size}`);
    }
    this.stepCount = state.step;
    this.m = new Map(state.m);
    this.v = new Map(state.v);
  }
}
