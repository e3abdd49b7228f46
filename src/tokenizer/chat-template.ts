// Chat templates are Jinja programs stored with the tokenizer; @huggingface/jinja is the JavaScript port of the
// subset transformers' templates use (it also provides raise_exception and strftime_now, as transformers does).
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import type { ChatMessage, ChatTemplateOptions } from './tokenizer.js';

/** Most interpreter steps (node evaluations) one render may take; real templates take a few thousand. */
export const MAX_TEMPLATE_STEPS = 250_000;
/** Longest one render may run, in milliseconds. */
export const MAX_TEMPLATE_MS = 2000;
/** Most items one `range()` call in a template may produce. */
export const MAX_TEMPLATE_RANGE = 100_000;

/**
 * The budget of the render in progress (rendering is synchronous, so one at a time) and the date it reads, or null
 * outside renders.
 */
let budget: { steps: number; deadline: number; date: string } | null = null;

// A template is a program from an untrusted folder (nested `range(100000)` loops would hang every command). The
// library has no step limit, but every node goes through Interpreter.evaluate, so counting there bounds any render.
const evaluate = Interpreter.prototype.evaluate;
Interpreter.prototype.evaluate = function (this: Interpreter, ...args: Parameters<Interpreter['evaluate']>) {
  if (budget) {
    if (++budget.steps > MAX_TEMPLATE_STEPS)
      throw new Error(`it ran past ${MAX_TEMPLATE_STEPS} steps (a template should take a few thousand)`);
    if ((budget.steps & 1023) === 0 && performance.now() > budget.deadline)
      throw new Error(`it ran past ${MAX_TEMPLATE_MS} ms`);
  }
  return evaluate.apply(this, args);
};

/** Jinja's `range`, refusing to build more than MAX_TEMPLATE_RANGE items (one step could otherwise fill memory). */
function boundedRange(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error('range() step must not be zero');
  const n = Math.max(0, Math.ceil((to - from) / step));
  if (!(n <= MAX_TEMPLATE_RANGE)) throw new Error(`range() of ${n} items is over the limit of ${MAX_TEMPLATE_RANGE}`);
  if (budget) budget.steps += n;
  return Array.from({ length: n }, (_, i) => from + i * step);
}

// The library declares its own `range` and `strftime_now` (the clock's, in the machine's locale) in every render's
// globals; during our renders they are replaced by the bounded range and the render's own date.
const BOUNDED_RANGE = new Environment().set('range', boundedRange);
const run = Interpreter.prototype.run;
Interpreter.prototype.run = function (this: Interpreter, ...args: Parameters<Interpreter['run']>) {
  if (budget) {
    this.global.setVariable('range', BOUNDED_RANGE);
    this.global.setVariable('strftime_now', new Environment().set('strftime_now', strftimeOf(budget.date)));
  }
  return run.apply(this, args);
};

/**
 * The date templates read in this process (strftime_now; Llama 3.2 writes it into every prompt), as YYYY-MM-DD: a
 * run's fixed date (data.date), so a resume after midnight or an agent on another machine renders the same prompt
 * tokens; null: the clock's, as transformers does.
 */
let fixedDate: string | null = null;

/** Fixes the date templates read in this process (YYYY-MM-DD), or with null hands it back to the clock. */
export function fixTemplateDate(date: string | null): void {
  fixedDate = date;
}

/** Today's local date as YYYY-MM-DD (the date `clock` says). */
export function localDate(clock: Date = new Date()): string {
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${clock.getFullYear()}-${pad(clock.getMonth() + 1)}-${pad(clock.getDate())}`;
}

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/**
 * Python's strftime of midnight on `date` (YYYY-MM-DD) for the directives templates use (%Y %m %d %b %B %H %M %%),
 * with English month names whatever the machine's locale (the library's own follows the locale).
 */
function strftimeOf(date: string): (format: string) => string {
  const [year, month, day] = date.split('-');
  const name = MONTHS[Number(month) - 1]!;
  const values: Record<string, string> = {
    '%Y': year!,
    '%m': month!,
    '%d': day!,
    '%b': name.slice(0, 3),
    '%B': name,
    '%H': '00',
    '%M': '00',
    '%%': '%',
  };
  return (format) => format.replace(/%[YmdbBHM%]/g, (token) => values[token]!);
}

/** The special-token strings a template may refer to (bos_token, eos_token, ...). */
export interface TemplateTokens {
  /** Beginning-of-sequence text, e.g. '<|begin_of_text|>'. */
  bos_token?: string;
  /** End-of-sequence text. */
  eos_token?: string;
  /** Padding text. */
  pad_token?: string;
  /** Unknown-token text. */
  unk_token?: string;
}

/** A tokenizer's chat template, parsed once on first use. */
export class ChatTemplate {
  private compiled: Template | undefined;

  constructor(
    /** The Jinja source, or null when there is no template. */
    readonly source: string | null,
    private readonly tokens: TemplateTokens,
    /** Who owns the template (a folder, usually), for errors. */
    private readonly owner: string,
  ) {}

  /**
   * Renders `messages` within MAX_TEMPLATE_STEPS steps and MAX_TEMPLATE_MS, reading the fixed date (fixTemplateDate)
   * or else `clock`'s; throws naming the owner when there is no template, or the template fails or runs past its
   * limits.
   */
  render(messages: readonly ChatMessage[], opts: ChatTemplateOptions, clock: () => Date = () => new Date()): string {
    if (this.source === null) throw new Error(`the tokenizer of ${this.owner} has no chat template`);
    try {
      this.compiled ??= new Template(this.source);
      budget = { steps: 0, deadline: performance.now() + MAX_TEMPLATE_MS, date: fixedDate ?? localDate(clock()) };
      return this.compiled.render({
        ...this.tokens,
        ...opts.variables,
        messages,
        add_generation_prompt: opts.addGenerationPrompt,
      });
    } catch (e) {
      throw new Error(`chat template of ${this.owner} failed: ${(e as Error).message}`);
    } finally {
      budget = null;
    }
  }
}
