// The RL run configuration: defaults, presets, YAML/JSON files, key.path=value overrides, the cross-field checks
// with their messages, and the JSON Schema that `hacrl config schema` prints.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runConfigResolve, runConfigSchema } from '../src/cli/config.js';
import { loadRunConfig, parseRunConfig, parseSavedRunConfig } from '../src/config/load-config.js';
import { configJsonSchema, type RunConfig } from '../src/config/rl-config.js';
import { DEFAULT_QUESTION_TEMPLATE } from '../src/tasks/prompt.js';
import { resolveRun } from '../src/train/resolved-run.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-rl-config-'));
after(() => rm(root, { recursive: true, force: true }));

const AGENT = ['agents.0.name=a', 'agents.0.checkpoint=runs/a'];
/** The config from overrides on top of one agent. */
const withOverrides = (...overrides: string[]): Promise<RunConfig> =>
  loadRunConfig(undefined, [...AGENT, ...overrides]);

/** Asserts that the config from `overrides` is refused with a message matching `message`. */
async function assertRefused(overrides: string[], message: RegExp): Promise<void> {
  await assert.rejects(withOverrides(...overrides), (e: Error) => {
    assert.match(e.message, message, overrides.join(' '));
    return true;
  });
}

test('a config with only an agent gets every default', async () => {
  const c = await withOverrides();
  assert.equal(c.algorithm, 'grpo');
  assert.equal(c.preset, undefined);
  assert.deepEqual(c.agents, [{ name: 'a', checkpoint: 'runs/a' }]);
  assert.deepEqual(c.data, {
    train: 'easy:train:2000',
    validation: ['easy:test:200'],
    template: DEFAULT_QUESTION_TEMPLATE,
  });
  assert.deepEqual(c.rollout, {
    promptsPerStep: 8,
    groupSize: 8,
    temperature: 1,
    topP: 1,
    topK: 0,
    maxNewTokens: 128,
    stopStrings: [],
  });
  assert.deepEqual(c.optim, {
    surrogate: 'token-clip',
    miniBatches: 1,
    epochs: 1,
    lossAggregation: 'token-mean',
    clipLow: 0.2,
    clipHigh: 0.28,
    dualClip: null,
    klEstimator: 'k3',
    klCoef: 0,
    entropyCoef: 0,
    advantage: 'group-std',
    filterZeroVariance: false,
    maskTruncated: false,
    oldLogProbs: 'learner',
    rolloutCorrection: 'none',
    rolloutCorrectionCap: 2,
    rolloutCorrectionLevel: 'token',
    lr: 1e-4,
    schedule: 'constant',
    warmupSteps: 0,
    minLrRatio: 0,
    weightDecay: 0.01,
    gradClip: 1,
    activationCheckpointing: false,
  });
  assert.deepEqual(c.reward, { math: 1, format: 0, custom: [] });
  assert.deepEqual(c.eval, { every: 10, problems: 200, samplesPerProblem: 0, atStart: true });
  assert.deepEqual(c.checkpoint, { every: 50, keepLast: 3 });
  assert.equal(c.steps, 100);
  assert.equal(c.seed, 0);
  assert.equal(c.runDir, 'runs/rl');
  assert.equal(c.samplesPerStep, 4);
  assert.equal(c.maxNonFiniteSteps, 3);
});

test('per-agent settings override the run-wide ones and absent ones inherit them', async () => {
  const c = await withOverrides(
    'agents.0.temperature=0.7',
    'agents.1.name=b',
    'agents.1.checkpoint=runs/b',
    'agents.1.lr=3e-5',
    'agents.1.template=Q: {question}',
    'rollout.topP=0.9',
  );
  const [a, b] = resolveRun(c).agents;
  assert.deepEqual([a!.temperature, a!.lr, a!.topP, a!.template], [0.7, 1e-4, 0.9, DEFAULT_QUESTION_TEMPLATE]);
  assert.deepEqual([b!.temperature, b!.lr, b!.topP, b!.template], [1, 3e-5, 0.9, 'Q: {question}']);
});

test('hacpo.ratioNormalization: token by default, char run-wide or per agent, anything else named', async () => {
  const base = ['agents.1.name=b', 'agents.1.checkpoint=runs/b'];
  const perAgent = (c: RunConfig): string[] => resolveRun(c).agents.map((a) => a.ratioNormalization);
  assert.deepEqual(perAgent(await withOverrides(...base)), ['token', 'token']);
  assert.deepEqual(perAgent(await withOverrides(...base, 'hacpo.ratioNormalization=char')), ['char', 'char']);
  assert.deepEqual(perAgent(await withOverrides(...base, 'agents.1.ratioNormalization=char')), ['token', 'char']);
  await assert.rejects(withOverrides(...base, 'hacpo.ratioNormalization=byte'), /hacpo\.ratioNormalization/);
});

/** The config `hacrl config resolve` gives for a file holding only `lines` and one agent (two for sharing). */
async function resolveFile(name: string, lines: string[], agents = 1): Promise<RunConfig> {
  const path = join(root, `${name}.yaml`);
  const list = Array.from({ length: agents }, (_, i) => `  - { name: a${i}, checkpoint: runs/a${i} }`);
  await writeFile(path, [...lines, 'agents:', ...list, 'data: { train: easy:train:100 }', ''].join('\n'));
  const printed: string[] = [];
  const log = console.log;
  console.log = (text: string) => void printed.push(text);
  try {
    await runConfigResolve(path, []);
  } finally {
    console.log = log;
  }
  return JSON.parse(printed.join('\n')) as RunConfig;
}

/** The recipe-owned settings of a resolved config, in one comparable shape. */
const recipeOf = (c: RunConfig) => ({
  algorithm: c.algorithm,
  clip: [c.optim.clipLow, c.optim.clipHigh],
  aggregation: c.optim.lossAggregation,
  advantage: c.optim.advantage,
  miniBatches: c.optim.miniBatches,
  groupSize: c.rollout.groupSize,
});

test('recipe grpo: `algorithm: grpo` alone is GRPO with DAPO clip-higher and a token-mean loss', async () => {
  assert.deepEqual(recipeOf(await resolveFile('grpo', ['algorithm: grpo'])), {
    algorithm: 'grpo',
    clip: [0.2, 0.28],
    aggregation: 'token-mean',
    advantage: 'group-std',
    miniBatches: 1,
    groupSize: 8,
  });
});

test('recipe gspo: `algorithm: gspo` alone is GSPO (ε 3e-4/4e-4, seq-mean-token-mean, 2 updates)', async () => {
  assert.deepEqual(recipeOf(await resolveFile('gspo', ['algorithm: gspo'])), {
    algorithm: 'gspo',
    clip: [3e-4, 4e-4],
    aggregation: 'seq-mean-token-mean',
    advantage: 'group-std',
    miniBatches: 2,
    groupSize: 8,
  });
});

test('recipe hacpo: `algorithm: hacpo` alone is HACPO with every mechanism and the stepwise schedule', async () => {
  const c = await resolveFile('hacpo', ['algorithm: hacpo'], 2);
  assert.deepEqual(recipeOf(c), {
    algorithm: 'hacpo',
    clip: [3e-4, 4e-4],
    aggregation: 'seq-mean-token-mean',
    advantage: 'capability-aware',
    miniBatches: 4,
    groupSize: 8,
  });
  assert.deepEqual(c.hacpo, {
    capabilityWindow: 5,
    capabilityBaseline: true,
    baseline: 'paper', // Eq. 7 with the batch ratio; the variants are switches (spec §7)
    omegaBand: [0.5, 2],
    omegaPrior: 8,
    discrepancyCoefficient: true,
    foreignSurrogate: 'hacpo-foreign',
    alpha: 1,
    delta: 0.2,
    deltaStep: 0.025,
    ratioNormalization: 'token', // the paper's Eq. 11 (spec §7: 'char' is the switch)
    order: 'shuffled',
  });
});

test('recipe naive: `algorithm: naive` alone is HACPO with every mechanism off', async () => {
  const c = await resolveFile('naive', ['algorithm: naive'], 2);
  assert.deepEqual(recipeOf(c), {
    algorithm: 'naive',
    clip: [3e-4, 4e-4],
    aggregation: 'seq-mean-token-mean',
    advantage: 'capability-aware',
    miniBatches: 4,
    groupSize: 8,
  });
  const { capabilityBaseline, discrepancyCoefficient, foreignSurrogate, alpha } = c.hacpo;
  assert.deepEqual(
    { capabilityBaseline, discrepancyCoefficient, foreignSurrogate, alpha },
    {
      capabilityBaseline: false,
      discrepancyCoefficient: false,
      foreignSurrogate: 'seq-clip',
      alpha: 0,
    },
  );
  assert.deepEqual(
    resolveRun(c).agents.map((a) => a.alpha),
    [0, 0],
  );
});

test('variant gspo-x2: one agent, G 16 and 4 updates of GSPO', async () => {
  assert.deepEqual(recipeOf(await resolveFile('x2', ['preset: gspo-x2'])), {
    algorithm: 'gspo',
    clip: [3e-4, 4e-4],
    aggregation: 'seq-mean-token-mean',
    advantage: 'group-std',
    miniBatches: 4,
    groupSize: 16,
  });
});

test('variants grpo-dapo and dr-grpo, and values the user gives win over any recipe', async () => {
  const dapo = await withOverrides('preset=grpo-dapo');
  assert.deepEqual(recipeOf(dapo), recipeOf(await withOverrides('algorithm=grpo')));
  const dr = await withOverrides('preset=dr-grpo');
  assert.deepEqual(
    [dr.algorithm, dr.optim.advantage, dr.optim.lossAggregation],
    ['grpo', 'none', 'seq-mean-token-sum'],
  );
  const mine = await withOverrides('preset=gspo-x2', 'rollout.groupSize=8', 'optim.clipHigh=1e-3');
  assert.deepEqual([mine.rollout.groupSize, mine.optim.miniBatches, mine.optim.clipHigh], [8, 4, 1e-3]);
  const hacpo = await withOverrides('algorithm=hacpo', 'agents.1.name=b', 'agents.1.checkpoint=y', 'hacpo.alpha=0.5');
  assert.deepEqual([hacpo.hacpo.alpha, hacpo.optim.miniBatches], [0.5, 4]);
});

test('the example configs name only their algorithm and get its recipe', async () => {
  const grpo = await loadRunConfig('examples/grpo-easy.yaml');
  assert.deepEqual(
    [grpo.preset, grpo.optim.clipLow, grpo.optim.clipHigh, grpo.optim.miniBatches],
    [undefined, 0.2, 0.28, 4],
  );
  const hacpo = await loadRunConfig('examples/hacpo-easy.yaml');
  assert.deepEqual(
    [hacpo.preset, hacpo.optim.clipHigh, hacpo.optim.miniBatches, hacpo.hacpo.deltaStep],
    [undefined, 4e-4, 4, 0.025],
  );
});

test('a saved resolved config reads back as itself; keys it lacks take their defaults, removed keys are refused', async () => {
  const saved = (c: RunConfig): Record<string, unknown> => JSON.parse(JSON.stringify(c)) as Record<string, unknown>;
  for (const c of [
    await loadRunConfig('examples/grpo-easy.yaml'),
    await loadRunConfig('examples/hacpo-easy.yaml'),
    await loadRunConfig('examples/hacpo-gsm8k-lora.yaml'),
    await withOverrides('preset=gspo-x2', 'optim.activationCheckpointing=true'),
  ])
    assert.deepEqual(parseSavedRunConfig(saved(c), 'config.resolved.json'), c);
  // A run started before optim.activationCheckpointing existed saved no value for it: read with today's default.
  const now = await withOverrides('algorithm=hacpo', 'agents.1.name=b', 'agents.1.checkpoint=y');
  const old = saved(now);
  delete (old.optim as Record<string, unknown>).activationCheckpointing;
  assert.deepEqual(parseSavedRunConfig(old, 'config.resolved.json'), now);
  const withCheckpointing = await withOverrides(
    'algorithm=hacpo',
    'agents.1.name=b',
    'agents.1.checkpoint=y',
    'optim.activationCheckpointing=true',
  );
  assert.notDeepEqual(parseSavedRunConfig(old, 'config.resolved.json'), withCheckpointing);
  assert.throws(
    () => parseSavedRunConfig({ ...old, retired: 1 }, '/runs/x/config.resolved.json'),
    /the saved configuration \/runs\/x\/config\.resolved\.json is invalid:\n✖ .*retired/,
  );
  assert.throws(() => parseSavedRunConfig([1], 'c.json'), /c\.json holds no configuration mapping/);
});

test('YAML and JSON files give the same config; overrides apply on top of a file', async () => {
  const yamlPath = join(root, 'run.yaml');
  await writeFile(
    yamlPath,
    [
      '# a GSPO run',
      'preset: gspo',
      'agents:',
      '  - name: small',
      '    checkpoint: runs/small',
      '    lr: 2.0e-4',
      'rollout:',
      '  groupSize: 4',
      '  stopStrings: ["\\n\\n"]',
      'reward: { math: 1, format: 0.1 }',
      '',
    ].join('\n'),
  );
  const jsonPath = join(root, 'run.json');
  await writeFile(
    jsonPath,
    JSON.stringify({
      preset: 'gspo',
      agents: [{ name: 'small', checkpoint: 'runs/small', lr: 2e-4 }],
      rollout: { groupSize: 4, stopStrings: ['\n\n'] },
      reward: { math: 1, format: 0.1 },
    }),
  );
  const fromYaml = await loadRunConfig(yamlPath);
  assert.deepEqual(await loadRunConfig(jsonPath), fromYaml);
  assert.deepEqual([fromYaml.algorithm, fromYaml.rollout.groupSize, fromYaml.agents[0]!.lr], ['gspo', 4, 2e-4]);
  assert.deepEqual(fromYaml.rollout.stopStrings, ['\n\n']);
  const over = await loadRunConfig(yamlPath, ['rollout.groupSize=2', 'agents.0.lr=1e-5']);
  assert.deepEqual([over.rollout.groupSize, over.agents[0]!.lr], [2, 1e-5]);

  const empty = join(root, 'empty.yaml');
  await writeFile(empty, '# nothing yet\n');
  assert.equal((await loadRunConfig(empty, AGENT)).steps, 100);
});

test('files that are not a config are refused, naming the file', async () => {
  const bad = join(root, 'bad.yaml');
  await writeFile(bad, 'rollout:\n  groupSize: [1,\n');
  await assert.rejects(loadRunConfig(bad), /config .*bad\.yaml is not valid YAML/);
  const list = join(root, 'list.yaml');
  await writeFile(list, '- a\n- b\n');
  await assert.rejects(loadRunConfig(list), /list\.yaml must hold a mapping of keys/);
  const json = join(root, 'bad.json');
  await writeFile(json, '{"steps": 3,}');
  await assert.rejects(loadRunConfig(json), /bad\.json is not valid JSON/);
  await assert.rejects(loadRunConfig(join(root, 'missing.yaml')), /cannot read config .*missing\.yaml/);
});

test('override values are YAML scalars, text fields verbatim, lists in flow style', async () => {
  const c = await withOverrides(
    'optim.dualClip=3',
    'optim.maskTruncated=true',
    'data.template={question} Answer:',
    'data.validation=[gsm8k.jsonl, easy:test:50]',
    'agents.0.stopStrings=["</s>"]',
    'seed=-7',
  );
  assert.equal(c.optim.dualClip, 3);
  assert.equal(c.optim.maskTruncated, true);
  assert.equal(c.data.template, '{question} Answer:');
  assert.deepEqual(c.data.validation, ['gsm8k.jsonl', 'easy:test:50']);
  assert.deepEqual(c.agents[0]!.stopStrings, ['</s>']);
  assert.equal(c.seed, -7);
  assert.equal((await withOverrides('optim.dualClip=3', 'optim.dualClip=null')).optim.dualClip, null);
});

test('unknown keys and malformed overrides are refused, naming the closest valid key', async () => {
  const cases: [string, RegExp][] = [
    ['rollout.groupSze=8', /unknown key "rollout\.groupSze": did you mean "rollout\.groupSize"\?/],
    ['optim.LR=1e-5', /did you mean "optim\.lr"\?/],
    [
      'groupSize=8',
      /unknown key "groupSize" \(valid keys: algorithm, .*\); did you mean "agents\.N\.groupSize" or "rollout\.groupSize" or "workflow\.groupSize" or "workflow\.grouping"\?/,
    ],
    [
      'agents.0.learningRate=1',
      /unknown key "agents\.0\.learningRate" \(valid keys of agents\.0: name, checkpoint, lr/,
    ],
    ['agents.x.lr=1', /"agents" is a list: the next key must be an index \(0, 1, …\), not "x"/],
    ['agents.3.lr=1', /"agents" has 1 entries: the index must be at most 1 \(which appends one\)/],
    ['steps.total=5', /"steps" is a single value: it has no key "total"/],
    ['rollout.groupSize', /must look like key\.path=value/],
    ['=3', /must look like key\.path=value/],
    ['rollout..groupSize=3', /must look like key\.path=value/],
    ['optim.dualClip=[1,', /the value is not valid YAML/],
  ];
  for (const [override, message] of cases) await assertRefused([override], message);
  const file = join(root, 'typo.yaml');
  await writeFile(file, 'agents: [{ name: a, checkpoint: x }]\noptim:\n  epoch: 2\n');
  await assert.rejects(loadRunConfig(file), /unknown key "optim\.epoch": did you mean "optim\.epochs"\?/);
});

test('every refused combination says what to change', async () => {
  const cases: [string[], RegExp][] = [
    [
      ['rollout.promptsPerStep=3', 'rollout.groupSize=3', 'optim.miniBatches=2'],
      /9 rollouts per step and learner \(rollout\.promptsPerStep 3 × the group sizes\) cannot be split into 2 equal mini-batches: set optim\.miniBatches to a divisor of 9 \(1, 3, 9\)/,
    ],
    [
      ['algorithm=hacpo', 'agents.1.name=b', 'agents.1.checkpoint=y', 'agents.1.groupSize=5', 'optim.miniBatches=3'],
      /104 rollouts per step and learner \(rollout\.promptsPerStep 8 × the group sizes of all agents\) cannot be split into 3/,
    ],
    [['rollout.groupSize=1'], /the group size is 1: .* set it to 2 or more\n {2}→ at rollout\.groupSize/],
    [['agents.0.groupSize=1'], /the group size is 1: .*\n {2}→ at agents\[0\]\.groupSize/],
    [['optim.epochs=0'], /must be at least 1: each step trains on its rollouts at least once\n {2}→ at optim\.epochs/],
    [['checkpoint.keepLast=0'], /must be at least 1: resuming needs a checkpoint\n {2}→ at checkpoint\.keepLast/],
    [
      ['rollout.temperature=0'],
      /rollout\.temperature is 0 \(greedy\) with a group size above 1: all completions .* identical/,
    ],
    [['agents.0.temperature=0'], /agents\.0\.temperature is 0 \(greedy\)/],
    [['reward.math=0'], /every reward weight is 0, .*give reward\.math, reward\.format or a reward\.custom entry/],
    [['optim.entropyCoef=-0.01'], /too small|greater than or equal to 0|>=0/i],
    [['algorithm=hacpo'], /algorithm "hacpo" trains agents on each other's rollouts but agents lists 1: add a second/],
    [['algorithm=naive'], /algorithm "naive" trains agents on each other's rollouts but agents lists 1/],
    [
      ['algorithm=hacpo', 'agents.1.name=b', 'agents.1.checkpoint=y', 'optim.miniBatches=4', 'optim.epochs=3'],
      /hacpo\.deltaStep 0\.025 closes the foreign clip band by the last of the 12 updates per step .* set it below 0\.0182/,
    ],
    [['hacpo.delta=1'], /too big|less than 1|<1/i],
    [['agents.0.alpha=-1'], /too small|greater than or equal to 0|>=0/i],
    [['preset=gspo', 'algorithm=grpo'], /preset "gspo" is a gspo preset but algorithm is "grpo"/],
    [
      ['preset=gspo-x2', 'agents.1.name=b', 'agents.1.checkpoint=y'],
      /preset "gspo-x2" is the one-agent baseline but agents lists 2: keep one agent, or use preset "gspo"/,
    ],
    [
      ['agents.1.name=a', 'agents.1.checkpoint=y'],
      /agent name "a" is used twice: give each its own name\n {2}→ at agents\[1\]\.name/,
    ],
    [['agents.0.name=my agent'], /agent names become folder names/],
    [['optim.warmupSteps=100'], /optim\.warmupSteps \(100\) must be less than steps \(100\)/],
    [['data.template=Solve this'], /data\.template has no \{question\} placeholder/],
    [['agents.0.template=Solve'], /agents\.0\.template has no \{question\} placeholder/],
    [['optim.dualClip=1'], /must be greater than 1 \(e\.g\. 3\), or null for off/],
    [['reward.custom=[{path: r/math.js, weight: 1}]'], /custom reward name "math" is taken by the built-in reward/],
    [
      ['reward.custom=[{path: a/len.js, weight: 1}, {path: b/len.mjs, weight: 1}]'],
      /custom reward name "len" is used twice/,
    ],
    [['preset=gspo3'], /Invalid option: expected one of "grpo-dapo"\|"dr-grpo"\|"gspo"\|"gspo-x2"/],
    [['agents=[]'], /list at least one agent/],
  ];
  for (const [overrides, message] of cases) await assertRefused(overrides, message);
});

test('several problems are reported together, each at its field', () => {
  assert.throws(
    () =>
      parseRunConfig({
        agents: [{ name: 'a', checkpoint: 'x' }],
        optim: { entropyCoef: -1 },
        reward: { math: 0 },
      }),
    (e: Error) => {
      assert.match(e.message, /^the configuration is invalid:\n/);
      assert.match(e.message, /every reward weight is 0[^\n]*\n {2}→ at reward/);
      assert.match(e.message, /[^\n]*\n {2}→ at optim\.entropyCoef/);
      return true;
    },
  );
});

/** Every property of the JSON Schema below `node`, with its path. */
function properties(node: Record<string, unknown>, prefix = ''): [string, Record<string, unknown>][] {
  const props = (node.properties ?? {}) as Record<string, Record<string, unknown>>;
  const items = node.items as Record<string, unknown> | undefined;
  return [
    ...Object.entries(props).flatMap(([k, v]): [string, Record<string, unknown>][] => [
      [prefix + k, v],
      ...properties(v, `${prefix}${k}.`),
    ]),
    ...(items ? properties(items, `${prefix}N.`) : []),
  ];
}

test('the JSON Schema documents every field, with the default of every defaulted one', () => {
  const schema = configJsonSchema();
  const top = Object.keys(schema.properties as object);
  assert.deepEqual(top, [
    'algorithm',
    'preset',
    'agents',
    'data',
    'rollout',
    'optim',
    'hacpo',
    'reward',
    'workflow',
    'reproducible',
    'steps',
    'seed',
    'eval',
    'logging',
    'checkpoint',
    'exchange',
    'runDir',
    'samplesPerStep',
    'maxNonFiniteSteps',
  ]);
  assert.deepEqual(schema.required, ['agents']);
  const all = properties(schema);
  assert.ok(all.length > 60, `${all.length} fields`);
  for (const [path, p] of all) {
    assert.equal(typeof p.description, 'string', `${path} has no description`);
    if ('default' in p && typeof p.default !== 'object')
      assert.match(p.description as string, /; default /, `${path} does not state its default`);
  }
});

test('runConfigSchema prints the JSON Schema', () => {
  const printed: string[] = [];
  const log = console.log;
  console.log = (s: string) => printed.push(s);
  try {
    runConfigSchema();
  } finally {
    console.log = log;
  }
  assert.deepEqual(JSON.parse(printed.join('\n')), configJsonSchema());
});
