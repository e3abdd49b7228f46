import type { Tokenizer } from '../tokenizer/tokenizer.js';

/**
 * The text of a sequence as its tokens arrive, handed out in pieces that never need taking back: a piece stops short
 * of an unfinished UTF-8 character (a byte-level token can end inside one) and of a tail that may be the start of a
 * stop string. When a stop string appears the text is cut before it.
 */
export class TextStream {
  private readonly ids: number[] = [];
  private text = '';
  private sent = 0;
  /** True once a stop string has appeared. */
  stopped = false;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly stops: readonly string[],
  ) {}

  /** Adds a token; returns the text that is now certain (possibly ''). */
  push(id: number): string {
    this.ids.push(id);
    this.text = this.tokenizer.decode(this.ids, { skipSpecialTokens: true });
    const cut = Math.min(...this.stops.map((s) => this.text.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(cut)) {
      this.stopped = true;
      this.text = this.text.slice(0, cut);
      return this.take(cut);
    }
    let end = this.text.endsWith('\uFFFD') ? this.text.length - 1 : this.text.length;
    for (const s of this.stops)
      for (let n = Math.min(s.length - 1, end); n > 0; n--)
        if (this.text.slice(end - n, end) === s.slice(0, n)) {
          end -= n;
          break;
        }
    return this.take(Math.max(end, this.sent));
  }

  /** The rest of the text (at the end of the sequence). */
  finish(): string {
    return this.take(this.text.length);
  }

  /** The whole text so far. */
  get all(): string {
    return this.text;
  }

  private take(end: number): string {
    const piece = this.text.slice(this.sent, end);
    this.sent = end;
    return piece;
  }
}
