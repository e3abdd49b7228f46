// Chat templates are Jinja programs stored with the tokenizer; @huggingface/jinja is the JavaScript port of the
// subset transformers' templates use (it also provides raise_exception and strftime_now, as transformers does).
import { Template } from '@huggingface/jinja';
import type { ChatMessage, ChatTemplateOptions } from './tokenizer.js';

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

  /** Renders `messages`; throws naming the owner when there is no template or the template fails. */
  render(messages: readonly ChatMessage[], opts: ChatTemplateOptions): string {
    if (this.source === null) throw new Error(`the tokenizer of ${this.owner} has no chat template`);
    try {
      this.compiled ??= new Template(this.source);
      return this.compiled.render({
        ...this.tokens,
        ...opts.variables,
        messages,
        add_generation_prompt: opts.addGenerationPrompt,
      });
    } catch (e) {
      throw new Error(`chat template of ${this.owner} failed: ${(e as Error).message}`);
    }
  }
}
