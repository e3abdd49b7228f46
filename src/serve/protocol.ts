// The OpenAI request bodies the server accepts (checked with zod), and its errors in OpenAI's shape.
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
  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
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

const stop = z
  .union([z.string().min(1), z.array(z.string().min(1)).max(MAX_STOP_STRINGS)])
  .nullable()
  .optional()
  .transform((s) => (s === null || s === undefined ? [] : typeof s === 'string' ? [s] : s));

const maxTokens = z.number().int().min(1, 'must be at least 1').nullable().optional();

/** Settings both endpoints share; fields this server cannot honour are refused unless left at their defaults. */
const common = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  seed: z.number().int().nullable().optional(),
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
