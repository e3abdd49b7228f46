// Expressions with several operations, precedence and parentheses, solved one operation per line so a tiny model
// learns where to look next (innermost, then leftmost) rather than the whole value at once.
import type { Rng } from '../../util/rng.js';
import {
  defineGenerator,
  generated,
  operatorList,
  pick,
  randBig,
  type Operator,
  type OperatorKnob,
  withExpression,
} from './common.js';

/** Difficulty knobs of 'expr' (operators default '+-*'). */
export interface ExprDifficulty extends OperatorKnob {
  /** Number of binary operations, exactly; default 2. */
  operations: number;
  /** Operands are drawn from 1..maxOperand; default 9. */
  maxOperand: number;
}

const PRECEDENCE: Record<Operator, number> = { '+': 1, '-': 1, '*': 2 };

/** An expression tree: a number, or an operation on two subtrees. */
export type ExprNode = { kind: 'num'; value: bigint } | { kind: 'op'; op: Operator; left: ExprNode; right: ExprNode };

/** The exact value of a tree. */
export function evaluate(n: ExprNode): bigint {
  if (n.kind === 'num') return n.value;
  const l = evaluate(n.left);
  const r = evaluate(n.right);
  return n.op === '+' ? l + r : n.op === '-' ? l - r : l * r;
}

/**
 * The text of a tree with only the parentheses it needs: around a lower-precedence child, and around a right child
 * of equal precedence (so reading left to right always meets the next operation to do in the tree's order).
 */
export function renderExpr(n: ExprNode, parent = 0, isRight = false): string {
  if (n.kind === 'num') return `${n.value}`;
  const p = PRECEDENCE[n.op];
  const s = `${renderExpr(n.left, p)}${n.op}${renderExpr(n.right, p, true)}`;
  return p < parent || (isRight && p === parent) ? `(${s})` : s;
}

/** The solution steps: the leftmost operation on two numbers, its value, and the expression that is left. */
export function exprSteps(tree: ExprNode): string[] {
  const lines: string[] = [];
  let t = tree;
  while (t.kind === 'op') {
    const { next, done } = reduceLeftmost(t);
    t = next;
    lines.push(t.kind === 'num' ? done : `${done}; ${renderExpr(t)}`);
  }
  return lines;
}

// Replaces the leftmost operation whose operands are both numbers by its value; `done` is e.g. "3+4=7".
function reduceLeftmost(n: ExprNode & { kind: 'op' }): { next: ExprNode; done: string } {
  const { left, right } = n;
  if (left.kind === 'num' && right.kind === 'num') {
    const value = evaluate(n);
    return { next: { kind: 'num', value }, done: `${left.value}${n.op}${right.value}=${value}` };
  }
  if (left.kind === 'op') {
    const r = reduceLeftmost(left);
    return { next: { ...n, left: r.next }, done: r.done };
  }
  const r = reduceLeftmost(right as ExprNode & { kind: 'op' });
  return { next: { ...n, right: r.next }, done: r.done };
}

// A random tree with `ops` operations (the split between left and right uniform); a '-' whose left side is smaller
// swaps its sides, so no intermediate value is negative and every step stays a plain non-negative number.
function randomTree(rng: Rng, ops: number, d: ExprDifficulty, operators: readonly Operator[]): ExprNode {
  if (ops === 0) return { kind: 'num', value: randBig(rng, 1, d.maxOperand) };
  const k = rng.int(ops);
  const op = pick(rng, operators);
  let left = randomTree(rng, k, d, operators);
  let right = randomTree(rng, ops - 1 - k, d, operators);
  if (op === '-' && evaluate(left) < evaluate(right)) [left, right] = [right, left];
  return { kind: 'op', op, left, right };
}

/** The value of every node of a tree, leaves included. */
function nodeValues(n: ExprNode): bigint[] {
  return n.kind === 'num' ? [n.value] : [evaluate(n), ...nodeValues(n.left), ...nodeValues(n.right)];
}

function maxLeaf(n: ExprNode): bigint {
  if (n.kind === 'num') return n.value;
  const l = maxLeaf(n.left);
  const r = maxLeaf(n.right);
  return l > r ? l : r;
}

/** 'expr': "What is (3+4)*5-6?", solved one operation per line. */
export const expr = defineGenerator<ExprDifficulty>({
  task: 'expr',
  defaults: { operations: 2, maxOperand: 9, operators: '+-*' },
  ints: { operations: [1, 64], maxOperand: [1, 1e9] },
  oodAxis: 'steps',
  harder: (d) => ({ ...d, operations: d.operations + 2 }),
  generate(rng: Rng, d: ExprDifficulty) {
    const tree = randomTree(rng, d.operations, d, operatorList('expr', d.operators));
    const text = renderExpr(tree);
    const g = generated('expr', `What is ${text}?`, `${evaluate(tree)}`, exprSteps(tree), {
      operations: d.operations,
      maxOperand: Number(maxLeaf(tree)),
      parentheses: text.split('(').length - 1,
    });
    // The text reads in JavaScript as the tree: the same precedence, left-associative, parentheses where needed.
    return withExpression(g, text, nodeValues(tree));
  },
});
