// Turns a question into the text an agent is prompted with: a question template (the paper's step-by-step \boxed{}
// suffix by default), then the agent's chat template, or a plain "Q: …\nA: " layout for a tokenizer without one.
import type { ChatMessage, Tokenizer } from '../tokenizer/tokenizer.js';

/** The instruction the paper appends to every question. */
export const BOXED_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}.";

/** The default question template: the question, a space, then BOXED_INSTRUCTION. */
export const DEFAULT_QUESTION_TEMPLATE = `{question} ${BOXED_INSTRUCTION}`;

/**
 * The default layout for tokenizers without a chat template: `{content}` is the user message (the templated
 * question); generation continues after "A: ". A system prompt, when given, goes on a line of its own first.
 */
export const DEFAULT_PLAIN_FORMAT = 'Q: {content}\nA: ';

/** Options for renderPrompt. */
export interface PromptOptions {
  /** Question template with a `{question}` placeholder; default DEFAULT_QUESTION_TEMPLATE ('{question}' for none). */
  template?: string;
  /** A system message; default none. */
  system?: string;
  /** Extra chat template variables, e.g. { enable_thinking: false } for Qwen3; default none. */
  variables?: Record<string, unknown>;
  /** Layout with a `{content}` placeholder when the tokenizer has no chat template; default DEFAULT_PLAIN_FORMAT. */
  plainFormat?: string;
}

/** `template` with `{question}` replaced by the question (literally: `$` in questions stays as it is). */
export function applyQuestionTemplate(question: string, template = DEFAULT_QUESTION_TEMPLATE): string {
  return fillPlaceholder(template, 'question', question);
}

/** The prompt text for `question`: through the tokenizer's chat template with the generation prompt, else plain. */
export function renderPrompt(
  tokenizer: Pick<Tokenizer, 'chatTemplate' | 'applyChatTemplate'>,
  question: string,
  opts: PromptOptions = {},
): string {
  const content = applyQuestionTemplate(question, opts.template);
  if (tokenizer.chatTemplate === null) {
    const body = fillPlaceholder(opts.plainFormat ?? DEFAULT_PLAIN_FORMAT, 'content', content);
    return opts.system === undefined ? body : `${opts.system}\n${body}`;
  }
  const messages: ChatMessage[] = [
    ...(opts.system === undefined ? [] : [{ role: 'system', content: opts.system }]),
    { role: 'user', content },
  ];
  return tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, variables: opts.variables });
}

// split/join rather than String.replace, whose replacement string would expand `$&` and friends found in math text.
function fillPlaceholder(template: string, name: string, value: string): string {
  const mark = `{${name}}`;
  if (!template.includes(mark)) throw new Error(`template ${JSON.stringify(template)} has no ${mark} placeholder`);
  return template.split(mark).join(value);
}
