/**
 * Workflows by name. The built-ins are registered here; a user adds one with registerWorkflow (a factory from the
 * `workflow` config section), and `workflow.name` in a run config then selects it — the trainer is not touched.
 */
import { mathToolWorkflow, planPathWorkflow, sokobanWorkflow, sudokuWorkflow } from './builtin.js';
import { codingWorkflow } from './coding.js';
import { type WorkflowConfig, parseWorkflowConfig } from './workflow-config.js';
import type { Workflow } from './workflow.js';

/** Builds a workflow from a parsed `workflow` config section. */
export type WorkflowFactory = (config: WorkflowConfig) => Workflow<unknown>;

const FACTORIES = new Map<string, WorkflowFactory>([
  ['plan-path', planPathWorkflow],
  ['sokoban', sokobanWorkflow],
  ['sudoku', sudokuWorkflow],
  ['math-tool', mathToolWorkflow],
  ['coding', codingWorkflow],
]);

/** Registers a workflow under `name`; refuses to replace an existing one silently. */
export function registerWorkflow(name: string, factory: WorkflowFactory, options: { replace?: boolean } = {}): void {
  if (FACTORIES.has(name) && !options.replace)
    throw new Error(`workflow "${name}" is already registered; pass { replace: true } to replace it`);
  FACTORIES.set(name, factory);
}

/** Names of every registered workflow. */
export function workflowNames(): string[] {
  return [...FACTORIES.keys()];
}

/** The workflow a raw `workflow` config section declares (parsed here). */
export function buildWorkflow(input: unknown): Workflow<unknown> {
  return workflowOf(parseWorkflowConfig(input));
}

/** The workflow a parsed `workflow` config section declares. */
export function workflowOf(config: WorkflowConfig): Workflow<unknown> {
  const factory = FACTORIES.get(config.name);
  if (!factory)
    throw new Error(`workflow.name: no workflow "${config.name}"; registered: ${workflowNames().join(', ')}`);
  return factory(config);
}
