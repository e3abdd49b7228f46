// The OpenAI request bodies the server accepts (checked with zod), the bodies it answers with (typed as OpenAI and
// vLLM define them, fields in the order they are sent) and its errors in OpenAI's shape.
import { z } from 'zod';

/** An error answered to the client: HTTP status and OpenAI's {error: {message, type, param, code}} body. */
export class ApiError extends Error {
  constructor(
    /** HTTP status (4xx for the client's mistakes). */
    readonly status: number,
    message: string,
    /** The request field at fault, if one is. */
    readonly param: string | null = null,
    /** OpenAI's machine-readable code, e.g. 'model_not_found'. */
    readonly code: string | null = null,
  ) {
    super(message);
  }

  /** The JSON body OpenAI clients parse. */
  body(): ErrorResponse {
    const type =
      this.status === 429 ? 'rate_limit_error' : this.status >= 500 ? 'server_error' : 'invalid_request_error';
    return { error: { message: this.message, type, param: this.param, code: this.code } };
  }
}

/** Most stop strings one request may give (OpenAI's limit). */
export const MAX_STOP_STRINGS = 4;
/** Most alternatives per token for chat `top_logprobs` (OpenAI's limit). */
export const MAX_CHAT_TOP_LOGPROBS = 20;
/** Most alternatives per token for completions `logprobs` (OpenAI's limit). */
export const MAX_COMPLETION_LOGPROBS = 5;
/** Largest `seed`: a sequence's generator is seeded with 32 bits, and a larger seed would alias a smaller one. */
export const MAX_SEED = 2 ** 32 - 1;

const stop = z
  .union([z.string().min(1), z.array(z.string().min(1)).max(MAX_STOP_STRINGS)])
  .nullable()
  .optional()
  .transform((s) => (s === null || s === undefined ? [] : typeof s === 'string' ? [s] : s));

const seedRange = `must be an integer from 0 to ${MAX_SEED}`;

const maxTokens = z.number().int().min(1, 'must be at least 1').nullable().optional();

/** Settings both endpoints share; fields this server cannot honour are refused unless left at their defaults. */
const common = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  seed: z.number().int(seedRange).min(0, seedRange).max(MAX_SEED, seedRange).nullable().optional(),
  stop,
  stream: z.boolean().nullable().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  n: z.literal(1, 'only n = 1 is supported').nullable().optional(),
  presence_penalty: z.literal(0, 'presence_penalty is not supported (only 0)').nullable().optional(),
  frequency_penalty: z.literal(0, 'frequency_penalty is not supported (only 0)').nullable().optional(),
  user: z.string().optional(),
  logit_bias: z
    .record(z.string(), z.number())
    .refine((b) => Object.keys(b).length === 0, 'logit_bias is not supported')
    .nullable()
    .optional(),
  response_format: z
    .looseObject({ type: z.literal('text', 'only the text response format is supported') })
    .nullable()
    .optional(),
};

const tokenIds = z.array(z.number().int().nonnegative()).min(1);

/** POST /v1/completions. */
export const CompletionRequest = z.looseObject({
  ...common,
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds, z.array(tokenIds).min(1)]),
  max_tokens: maxTokens,
  logprobs: z.number().int().min(0).max(MAX_COMPLETION_LOGPROBS).nullable().optional(),
  echo: z.literal(false, 'echo is not supported').nullable().optional(),
  best_of: z.literal(1, 'only best_of = 1 is supported').nullable().optional(),
  suffix: z.null('suffix is not supported').optional(),
});
/** A parsed completions request. */
export type CompletionRequest = z.output<typeof CompletionRequest>;

const content = z.union([
  z.string(),
  z.array(z.looseObject({ type: z.literal('text', 'only text content parts are supported'), text: z.string() })),
]);

/** POST /v1/chat/completions. */
export const ChatRequest = z.looseObject({
  ...common,
  messages: z
    .array(z.looseObject({ role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']), content }))
    .min(1),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(MAX_CHAT_TOP_LOGPROBS).nullable().optional(),
  tools: z.array(z.unknown()).max(0, 'tools are not supported').nullable().optional(),
});
/** A parsed chat request. */
export type ChatRequest = z.output<typeof ChatRequest>;

/** Parses a body with `schema`, or throws a 400 naming the first field at fault. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const param = issue.path.join('.') || null;
  throw new ApiError(400, `${param ? `${param}: ` : ''}${issue.message}`, param, 'invalid_value');
}

/** The text of a chat message's content (text parts joined). */
export function messageText(c: z.output<typeof content>): string {
  return typeof c === 'string' ? c : c.map((p) => p.text).join('');
}

/** An error body: {error: {message, type, param, code}}. */
export interface ErrorResponse {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** One served model, as GET /v1/models/{id} answers it. */
export interface ModelCard {
  id: string;
  object: 'model';
  /** Unix time (seconds) the server began serving it. */
  created: number;
  owned_by: string;
}

/** GET /v1/models. */
export interface ModelList {
  object: 'list';
  data: ModelCard[];
}

/** Token counts of a request: its prompts and its choices' completions. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Why a choice ended: a stop token or string, or max_tokens; null in a stream chunk of an unfinished choice. */
export type FinishReason = 'stop' | 'length';

/** The legacy completions logprobs: per token its text, log-prob, top alternatives (text → log-prob), text offset. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[];
  text_offset: number[];
}

/** One choice of a completion: the whole text, or (streamed) a piece of it. */
export interface CompletionChoice {
  index: number;
  text: string;
  logprobs: CompletionLogprobs | null;
  finish_reason: FinishReason | null;
}

/** POST /v1/completions' answer, and each event of its stream (the last of which may carry only the usage). */
export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  /** On the whole answer, and on a stream's last event when stream_options.include_usage asks for it. */
  usage?: Usage;
}

/** One alternative of a chat token: its text, log-prob and UTF-8 bytes. */
export interface ChatTopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** A chat token's log-prob entry, with its top alternatives. */
export interface ChatTokenLogprob extends ChatTopLogprob {
  top_logprobs: ChatTopLogprob[];
}

/** A chat choice's logprobs (only content: this server never refuses). */
export interface ChatLogprobs {
  content: ChatTokenLogprob[];
  refusal: null;
}

/** The fields of every chat answer and chunk, in the order they are sent. */
interface ChatHead {
  id: string;
  created: number;
  model: string;
}

/** POST /v1/chat/completions' answer without streaming. */
export interface ChatCompletion extends ChatHead {
  object: 'chat.completion';
  choices: {
    index: number;
    message: { role: 'assistant'; content: string; refusal: null };
    logprobs: ChatLogprobs | null;
    finish_reason: FinishReason;
  }[];
  usage: Usage;
}

/** One event of a streamed chat answer: the assistant's role first, then pieces of text, then (optionally) usage. */
export interface ChatCompletionChunk extends ChatHead {
  object: 'chat.completion.chunk';
  choices: {
    index: number;
    delta: { role?: 'assistant'; content?: string };
    /** Absent on the role's opening event. */
    logprobs?: ChatLogprobs | null;
    finish_reason: FinishReason | null;
  }[];
  /** On the last event when stream_options.include_usage asks for it. */
  usage?: Usage;
}
