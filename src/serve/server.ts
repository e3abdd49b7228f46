/**
 * An OpenAI-compatible HTTP server over hacrl models: /v1/models, /v1/completions and /v1/chat/completions, plain
 * JSON or server-sent events, every model's requests decoded together by its Batcher. Node's own http module is
 * enough for four routes and SSE; request bodies are checked with zod (protocol.ts).
 */
import { createHash, randomInt, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Kernels } from '../backend/kernels.js';
import type { Pretrained } from '../model/pretrained.js';
import { Batcher, type SampledToken, type SequenceEnd } from './batcher.js';
import {
  ApiError,
  ChatRequest,
  CompletionRequest,
  MAX_SEED,
  messageText,
  parseBody,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatLogprobs,
  type ChatTokenLogprob,
  type ChatTopLogprob,
  type Completion,
  type CompletionLogprobs,
  type ErrorResponse,
  type FinishReason,
  type ModelCard,
  type ModelList,
  type Usage,
} from './protocol.js';
import { TextStream } from './text-stream.js';

/** Settings of the server. */
export interface ServeOptions {
  /** Address to bind; default 127.0.0.1 (loopback only). */
  host: string;
  /** TCP port; 0 picks a free one. Default 8000. */
  port: number;
  /** Most sequences of one model decoded in one batch; default 32. */
  maxBatch: number;
  /** Most sequences of one model waiting for a place in the batch; more are refused with 429. Default 64. */
  maxWaiting: number;
  /** Largest request body, in bytes; larger ones are refused with 413. Default 1 MiB. */
  maxBodyBytes: number;
  /**
   * Most bytes of one stream's events waiting for a client that does not read them; past it the client is dropped
   * and its sequences cancelled. Default 1 MiB.
   */
  maxStreamBufferBytes: number;
  /** The key every request must bring as `Authorization: Bearer KEY` (else 401); null: no key is asked for. */
  apiKey: string | null;
}

/** Defaults of ServeOptions. */
export const SERVE_DEFAULTS: ServeOptions = {
  host: '127.0.0.1',
  port: 8000,
  maxBatch: 32,
  maxWaiting: 64,
  maxBodyBytes: 1 << 20,
  maxStreamBufferBytes: 1 << 20,
  apiKey: null,
};

/**
 * How long a shutdown waits for the last events of cancelled requests to reach their clients before it closes the
 * connections: a client that reads nothing would otherwise hold the shutdown forever.
 */
const FLUSH_MS = 2_000;

interface Served {
  name: string;
  pretrained: Pretrained;
  batcher: Batcher;
  /** Token ids that end a sequence: the tokenizer's eos and generation_config.json's. */
  stopTokens: ReadonlySet<number>;
  created: number;
}

/** What one choice needs decoded: its prompt and the request's settings. */
interface ChoiceSettings {
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  stops: string[];
  topLogprobs: number;
}

/** The settings with the check of a prompt against the model's context (400 when prompt and completion overflow it). */
type DecodeSettings = ChoiceSettings & { check: (p: number[]) => void };

/** Every body answered as one JSON document. */
type JsonBody = ModelList | ModelCard | Completion | ChatCompletion | ErrorResponse;

/** A finished choice. */
interface ChoiceResult {
  text: string;
  tokens: SampledToken[];
  finish: FinishReason;
}

/** Called as a choice's text grows: its index, the new text, the tokens since the last call, and the end if any. */
type OnPiece<T = void> = (index: number, text: string, tokens: SampledToken[], finish: FinishReason | null) => T;

/** How an endpoint words its answer: the events of a stream, or the whole body. */
interface Answer<Chunk, Body extends JsonBody> {
  /** The event sent before any text (chat: the assistant's role). */
  opening?: Chunk;
  /** The event of a piece of one choice's text. */
  piece: OnPiece<Chunk>;
  /** The last event, when stream_options.include_usage asks for the usage. */
  usage: (usage: Usage) => Chunk;
  /** The answer without streaming. */
  whole: (results: ChoiceResult[], usage: Usage) => Body;
}

const FINISH: Record<Exclude<SequenceEnd, 'cancelled'>, FinishReason> = {
  stop_token: 'stop',
  stop_string: 'stop',
  length: 'length',
};

/** A running server; `stop` shuts it down. */
export class HacrlServer {
  private readonly models = new Map<string, Served>();
  private readonly inFlight = new Set<{ done: Promise<void>; abort: AbortController }>();
  private closing = false;

  private constructor(
    private readonly http: Server,
    private readonly o: ServeOptions,
    /** The address clients use, e.g. http://127.0.0.1:8000/v1. */
    readonly url: string,
  ) {}

  /** Loads nothing: serves the given models (name → checkpoint) on `o.host`:`o.port` until stop(). */
  static async start(models: ReadonlyMap<string, Pretrained>, k: Kernels, options: Partial<ServeOptions> = {}) {
    const o = { ...SERVE_DEFAULTS, ...options };
    const http = createServer();
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject);
      http.listen(o.port, o.host, () => resolve());
    });
    const { address, port } = http.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    const server = new HacrlServer(http, o, `http://${host}:${port}/v1`);
    const created = Math.floor(Date.now() / 1000);
    for (const [name, pretrained] of models) {
      const { tokenizer, generation } = pretrained;
      const stopTokens = new Set([tokenizer.eosId, ...(generation?.eosIds ?? [])]);
      const batcher = new Batcher(pretrained.model, k, o.maxBatch);
      server.models.set(name, { name, pretrained, batcher, stopTokens, created });
    }
    http.on('request', (req: IncomingMessage, res: ServerResponse) => server.track(req, res));
    return server;
  }

  /**
   * Stops accepting requests, lets running ones finish for up to `graceMs` milliseconds, then cancels the rest
   * (streams end with an error event and [DONE], other requests get 503) and closes every connection once those last
   * bytes are sent (or after FLUSH_MS, for a client that does not read them).
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.closing = true;
    const closed = new Promise<void>((r) => this.http.close(() => r()));
    this.http.closeIdleConnections();
    const all = (): Promise<unknown> => Promise.all([...this.inFlight].map((f) => f.done));
    // With no grace the requests are cancelled at once, at the next step boundary: waiting even a timer's tick
    // would let decoding run on, and a short stream finish instead of being cancelled.
    if (graceMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all(), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
    for (const f of this.inFlight) f.abort.abort();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all(), new Promise((r) => (timer = setTimeout(r, FLUSH_MS)))]);
    clearTimeout(timer);
    this.http.closeAllConnections();
    await all();
    await closed;
    for (const m of this.models.values()) await m.batcher.close();
  }

  private track(req: IncomingMessage, res: ServerResponse): void {
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    // Done once the answer's last bytes are handed to the socket: closing the connection before that would cut them.
    const entry = { done: this.handle(req, res, abort.signal).then(() => sent(res)), abort };
    this.inFlight.add(entry);
    void entry.done.finally(() => this.inFlight.delete(entry));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    try {
      this.authorize(req);
      if (this.closing) throw new ApiError(503, 'the server is shutting down');
      const path = new URL(req.url ?? '/', 'http://localhost').pathname.replace(/\/+$/, '');
      const route = `${req.method} ${path}`;
      if (route === 'GET /v1/models')
        return sendJson(res, 200, { object: 'list', data: [...this.models.values()].map(modelCard) });
      if (req.method === 'GET' && path.startsWith('/v1/models/'))
        return sendJson(res, 200, modelCard(this.model(decodePath(path.slice('/v1/models/'.length)))));
      if (route === 'POST /v1/completions')
        return await this.completions(parseBody(CompletionRequest, await this.readJson(req, signal)), res, signal);
      if (route === 'POST /v1/chat/completions')
        return await this.chat(parseBody(ChatRequest, await this.readJson(req, signal)), res, signal);
      const known = ['/v1/models', '/v1/completions', '/v1/chat/completions'].includes(path);
      throw known
        ? new ApiError(405, `${req.method} is not allowed on ${path}`)
        : new ApiError(404, `no such endpoint: ${req.method} ${path}`, null, 'unknown_url');
    } catch (e) {
      const err = e instanceof ApiError ? e : failure(500, e);
      if (!res.headersSent) sendJson(res, err.status, err.body());
      else if (!res.writableEnded && !res.destroyed) res.end(`data: ${JSON.stringify(err.body())}\n\n${DONE}`);
    }
  }

  /** Throws 401 unless the request brings the server's key as OpenAI clients send it, `Authorization: Bearer KEY`. */
  private authorize(req: IncomingMessage): void {
    if (this.o.apiKey === null) return;
    const given = /^Bearer +(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
    if (given === undefined)
      throw new ApiError(401, 'no API key given: send it as Authorization: Bearer KEY', null, 'invalid_api_key');
    // Digests of equal length compare in constant time, whatever the lengths of the keys.
    const digest = (key: string): Buffer => createHash('sha256').update(key).digest();
    if (!timingSafeEqual(digest(given), digest(this.o.apiKey)))
      throw new ApiError(401, 'incorrect API key given', null, 'invalid_api_key');
  }

  private model(name: string): Served {
    const m = this.models.get(name);
    if (!m)
      throw new ApiError(
        404,
        `the model '${name}' does not exist; this server has ${[...this.models.keys()].join(', ')}`,
        'model',
        'model_not_found',
      );
    return m;
  }

  /**
   * The body as JSON, refusing another Content-Type (415), more than maxBodyBytes (413) and text that is not JSON
   * (400). Cancelling the request
   * ends a body still arriving: a client stalled mid-body would otherwise hold stop() forever.
   */
  private async readJson(req: IncomingMessage, signal: AbortSignal): Promise<unknown> {
    const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
    // A web page may post a form or text to a local server without asking; only a script allowed by CORS sends JSON.
    if (type !== 'application/json')
      throw new ApiError(
        415,
        `the request body must be JSON sent with Content-Type: application/json, not ${type ?? 'no Content-Type'}`,
        null,
        'unsupported_media_type',
      );
    const chunks: Buffer[] = [];
    let size = 0;
    const end = (): void => void req.destroy();
    signal.addEventListener('abort', end, { once: true });
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > this.o.maxBodyBytes)
          throw new ApiError(413, `the request body is over the limit of ${this.o.maxBodyBytes} bytes`);
        chunks.push(chunk);
      }
    } catch (e) {
      throw signal.aborted ? cancelled() : e;
    } finally {
      signal.removeEventListener('abort', end);
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    } catch (e) {
      throw new ApiError(400, `the request body is not valid JSON: ${(e as Error).message}`, null, 'invalid_json');
    }
  }

  private async completions(r: CompletionRequest, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const m = this.model(r.model);
    const tok = m.pretrained.tokenizer;
    const raw = r.prompt;
    const prompts: number[][] =
      typeof raw === 'string'
        ? [encode(m, raw, 'prompt')]
        : typeof raw[0] === 'number'
          ? [raw as number[]]
          : (raw as (string | number[])[]).map((p, i) => (typeof p === 'string' ? encode(m, p, `prompt.${i}`) : p));
    for (const p of prompts)
      for (const id of p)
        if (id >= m.pretrained.model.decodableIds)
          throw new ApiError(400, `prompt token id ${id} is outside the vocabulary`, 'prompt', 'invalid_value');
    const settings = this.settings(m, r, r.max_tokens ?? 16, r.logprobs ?? 0, prompts.length);
    const id = `cmpl-${randomUUID()}`;
    const head = { id, object: 'text_completion' as const, created: now(), model: m.name };
    const logprobs = (tokens: SampledToken[], offset: number) =>
      r.logprobs === null || r.logprobs === undefined ? null : completionLogprobs(tok, tokens, offset);
    // Where each choice's streamed text has reached: its next piece's text offsets start there.
    const offsets = prompts.map(() => 0);
    await this.answer<Completion, Completion>(r, res, m, prompts, settings, signal, {
      piece: (index, text, tokens, finish) => {
        const choice = { index, text, logprobs: logprobs(tokens, offsets[index]!), finish_reason: finish };
        offsets[index] = offsets[index]! + text.length;
        return { ...head, choices: [choice] };
      },
      usage: (u) => ({ ...head, choices: [], usage: u }),
      whole: (results, u) => {
        const choices = results.map((c, index) => ({
          index,
          text: c.text,
          logprobs: logprobs(c.tokens, 0),
          finish_reason: c.finish,
        }));
        return { ...head, choices, usage: u };
      },
    });
  }

  private async chat(r: ChatRequest, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const m = this.model(r.model);
    const tok = m.pretrained.tokenizer;
    if (tok.chatTemplate === null)
      throw new ApiError(400, `the model '${m.name}' has no chat template; use /v1/completions`, 'messages');
    let text: string;
    try {
      const messages = r.messages.map((msg) => ({ ...msg, content: messageText(msg.content) }));
      text = tok.applyChatTemplate(messages, { addGenerationPrompt: true });
    } catch (e) {
      throw failure(400, e, 'messages');
    }
    const prompt = encode(m, text, 'messages');
    const room = m.pretrained.model.cfg.maxPositions - prompt.length;
    const want = r.max_completion_tokens ?? r.max_tokens ?? Math.max(room, 1);
    const settings = this.settings(m, r, want, r.logprobs ? (r.top_logprobs ?? 0) : 0, 1);
    const id = `chatcmpl-${randomUUID()}`;
    const head = { id, created: now(), model: m.name };
    const chunk = { ...head, object: 'chat.completion.chunk' as const };
    const logprobs = (tokens: SampledToken[]): ChatLogprobs | null =>
      r.logprobs ? { content: chatLogprobs(tok, tokens), refusal: null } : null;
    await this.answer<ChatCompletionChunk, ChatCompletion>(r, res, m, [prompt], settings, signal, {
      opening: { ...chunk, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      piece: (index, content, tokens, finish) => {
        const delta = content === '' && finish ? {} : { content };
        return { ...chunk, choices: [{ index, delta, logprobs: logprobs(tokens), finish_reason: finish }] };
      },
      usage: (u) => ({ ...chunk, choices: [], usage: u }),
      whole: ([c], u) => ({
        ...head,
        object: 'chat.completion',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: c!.text, refusal: null },
            logprobs: logprobs(c!.tokens),
            finish_reason: c!.finish,
          },
        ],
        usage: u,
      }),
    });
  }

  /**
   * Decodes every prompt as one choice and answers in `a`'s words: with `r.stream`, server-sent events as the text
   * grows (opened before decoding starts, so a later error ends the stream as an event), the usage last when asked
   * for, then [DONE]; otherwise one JSON body.
   */
  private async answer<Chunk, Body extends JsonBody>(
    r: ChatRequest | CompletionRequest,
    res: ServerResponse,
    m: Served,
    prompts: number[][],
    settings: DecodeSettings,
    signal: AbortSignal,
    a: Answer<Chunk, Body>,
  ): Promise<void> {
    if (!r.stream) {
      const results = await this.decode(m, prompts, settings, signal);
      return sendJson(res, 200, a.whole(results, usage(prompts, results)));
    }
    const sse = startSse<Chunk>(res, this.o.maxStreamBufferBytes);
    if (a.opening !== undefined) sse(a.opening);
    const results = await this.decode(m, prompts, settings, signal, (...piece) => sse(a.piece(...piece)));
    if (r.stream_options?.include_usage) sse(a.usage(usage(prompts, results)));
    if (!res.destroyed) res.end(DONE);
  }

  private settings(
    m: Served,
    r: ChatRequest | CompletionRequest,
    maxTokens: number,
    topLogprobs: number,
    choices: number,
  ): DecodeSettings {
    const positions = m.pretrained.model.cfg.maxPositions;
    // Choice i draws with seed + i: every one of them must be a seed, or two requests would share a generator.
    if (r.seed !== null && r.seed !== undefined && r.seed + choices - 1 > MAX_SEED)
      throw new ApiError(
        400,
        `seed: with ${choices} prompts, seed + ${choices - 1} must be at most ${MAX_SEED} (choice i draws with seed + i)`,
        'seed',
        'invalid_value',
      );
    return {
      maxTokens,
      temperature: r.temperature ?? 1,
      topP: r.top_p ?? 1,
      // Without a seed every request draws its own, as OpenAI's API does.
      seed: r.seed ?? randomInt(2 ** 31),
      stops: r.stop,
      topLogprobs,
      check: (p) => {
        if (p.length + maxTokens > positions)
          throw new ApiError(
            400,
            `this model's maximum context length is ${positions} tokens, but ${p.length + maxTokens} were ` +
              `requested (${p.length} in the prompt, ${maxTokens} for the completion); shorten the prompt or ` +
              'lower max_tokens',
            'max_tokens',
            'context_length_exceeded',
          );
      },
    };
  }

  /** Decodes every prompt as one choice, calling `onPiece` as their text grows; 429 when the queue is full. */
  private async decode(
    m: Served,
    prompts: number[][],
    s: DecodeSettings,
    signal: AbortSignal,
    onPiece?: OnPiece,
  ): Promise<ChoiceResult[]> {
    for (const p of prompts) s.check(p);
    if (m.batcher.load + prompts.length > this.o.maxBatch + this.o.maxWaiting)
      throw new ApiError(
        429,
        `the model '${m.name}' has ${m.batcher.load} sequences running or waiting, the most it takes is ` +
          `${this.o.maxBatch + this.o.maxWaiting}; retry later`,
      );
    const results = await Promise.all(
      prompts.map(async (prompt, index): Promise<ChoiceResult> => {
        const text = new TextStream(m.pretrained.tokenizer, s.stops);
        const tokens: SampledToken[] = [];
        let unsent: SampledToken[] = [];
        const end = await m.batcher.submit(
          {
            prompt,
            maxTokens: s.maxTokens,
            temperature: s.temperature,
            topP: s.topP,
            seed: s.seed + index,
            stopTokens: m.stopTokens,
            topLogprobs: s.topLogprobs,
            onToken: (t) => {
              tokens.push(t);
              unsent.push(t);
              const piece = text.push(t.id);
              if (onPiece && piece !== '') {
                onPiece(index, piece, unsent, null);
                unsent = [];
              }
              return text.stopped;
            },
          },
          signal,
        );
        if (end === 'cancelled') throw cancelled();
        const finish = FINISH[end];
        onPiece?.(index, text.finish(), unsent, finish);
        return { text: text.all, tokens, finish };
      }),
    );
    return results;
  }
}

/** The answer to a request cancelled before it was done (503). */
function cancelled(): ApiError {
  return new ApiError(503, 'the request was cancelled: the client went away or the server is shutting down');
}

/** The prompt's token ids; a text the tokenizer refuses is the client's mistake (400). */
function encode(m: Served, text: string, param: string): number[] {
  try {
    const ids = m.pretrained.tokenizer.encode(text);
    if (ids.length === 0) throw new Error('the prompt encodes to no tokens');
    return ids;
  } catch (e) {
    throw failure(400, e, param);
  }
}

/**
 * The answer to an error thrown inside the server: its message without the server's folder paths (a tokenizer's
 * error names its folder), which are no business of the client's.
 */
function failure(status: number, e: unknown, param: string | null = null): ApiError {
  const message = e instanceof Error ? e.message : String(e);
  return new ApiError(status, message.replace(ABSOLUTE_PATH, '$1<path>'), param);
}

/** A POSIX or Windows absolute path of two or more parts, after a start, a space or an opening quote/bracket. */
const ABSOLUTE_PATH = /(^|[\s'"`([=])(?:[A-Za-z]:)?[\\/][^\s'"`)\]\\/]+(?:[\\/][^\s'"`)\]\\/]*)+/g;

/** A percent-decoded URL path segment; a malformed escape is the client's mistake (400). */
function decodePath(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, `the URL path has a malformed percent escape: ${segment}`, null, 'invalid_url');
  }
}

/** The card GET /v1/models shows for `m`. */
function modelCard(m: Served): ModelCard {
  return { id: m.name, object: 'model', created: m.created, owned_by: 'hacrl' };
}

function now(): number {
  return Math.floor(Date.now() / 1000);
}

/** The token counts of `prompts` and their choices. */
function usage(prompts: number[][], results: ChoiceResult[]): Usage {
  const prompt = prompts.reduce((n, p) => n + p.length, 0);
  const completion = results.reduce((n, c) => n + c.tokens.length, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** Answers with `body` as one JSON document. */
function sendJson(res: ServerResponse, status: number, body: JsonBody): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** The last event of every stream. */
const DONE = 'data: [DONE]\n\n';

/** Resolves once `res` has handed its last bytes to the socket, or its connection is gone. */
function sent(res: ServerResponse): Promise<void> {
  if (res.writableFinished || res.destroyed) return Promise.resolve();
  return new Promise((r) => {
    res.once('finish', r);
    res.once('close', r);
  });
}

/**
 * Opens a server-sent-event stream; returns the function that sends one event. Decoding does not wait for a slow
 * client (the batch it shares would wait too), so events a client has not taken pile up: past `maxBuffered` bytes
 * the client is dropped, which cancels its sequences, rather than the server's memory growing with it.
 */
function startSse<Event>(res: ServerResponse, maxBuffered: number): (event: Event) => void {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  return (event) => {
    if (res.writableEnded || res.destroyed) return;
    res.write(`data: ${JSON.stringify(event)}\n\n`);
    if (res.writableLength > maxBuffered) res.destroy();
  };
}

/** The legacy completions logprobs object: token texts, their log-probs, the top alternatives, text offsets. */
function completionLogprobs(tok: Pretrained['tokenizer'], tokens: SampledToken[], offset: number): CompletionLogprobs {
  const text = (id: number): string => tok.decode([id]);
  const offsets: number[] = [];
  for (const t of tokens) {
    offsets.push(offset);
    offset += text(t.id).length;
  }
  return {
    tokens: tokens.map((t) => text(t.id)),
    token_logprobs: tokens.map((t) => t.logProb),
    top_logprobs: tokens.map((t) => Object.fromEntries(t.top.map((a) => [text(a.id), a.logProb]))),
    text_offset: offsets,
  };
}

/** The chat logprobs entries: each token's text, log-prob, UTF-8 bytes and top alternatives. */
function chatLogprobs(tok: Pretrained['tokenizer'], tokens: SampledToken[]): ChatTokenLogprob[] {
  const entry = (id: number, logprob: number): ChatTopLogprob => {
    const token = tok.decode([id]);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  };
  return tokens.map((t) => ({ ...entry(t.id, t.logProb), top_logprobs: t.top.map((a) => entry(a.id, a.logProb)) }));
}
