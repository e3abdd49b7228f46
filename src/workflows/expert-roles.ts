/**
 * Roles answered by the environment's solver instead of a model: the diagnosis tool for a workflow ("how well does the
 * coder do when the tester's cases are the reference's?"). Each named role is routed to one policy, EXPERT_POLICY, that
 * answers a prompt with the solver's response for the state that prompt was built from (or nothing where the solver
 * has none), so later roles see the expert's words exactly as they would a model's.
 */
import type { Policy } from './policy.js';
import type { Workflow } from './workflow.js';

/** The policy name the expert roles are routed to. */
export const EXPERT_POLICY = 'expert';

/**
 * `wf` with the roles `names` answered by their solver, and the policy (under EXPERT_POLICY) that answers them. The
 * policy remembers each prompt's solver answer when the prompt is built, so it serves one workflow's episodes only.
 */
export function withExpertRoles(
  wf: Workflow<unknown>,
  names: readonly string[],
): { workflow: Workflow<unknown>; expert: Policy } {
  for (const n of names)
    if (!wf.roles.some((r) => r.name === n))
      throw new Error(
        `no role "${n}" in workflow "${wf.name}" to answer by its solver; roles: ${wf.roles.map((r) => r.name).join(', ')}`,
      );
  const answers = new Map<string, string>();
  const roles = wf.roles.map((r) =>
    names.includes(r.name)
      ? {
          ...r,
          policy: EXPERT_POLICY,
          prompt: (state: Parameters<typeof r.prompt>[0]) => {
            const p = r.prompt(state);
            answers.set(p, r.expert(state) ?? '');
            return p;
          },
        }
      : r,
  );
  const expert: Policy = { generate: async (prompts) => prompts.map((p) => ({ text: answers.get(p) ?? '' })) };
  return { workflow: { ...wf, roles }, expert };
}
