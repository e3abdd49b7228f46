// The shape every task, generated or read from a file, hands to training and evaluation.

/** One problem with an exactly checkable answer. */
export interface Problem {
  /** Stable id: the same problem gets the same id in every run (generated: task + hash of its text). */
  id: string;
  /** The question text alone, without any prompt template (see prompt.ts for that). */
  prompt: string;
  /** The exact gold answer as text: "42", "-3/4", "5" (for x=5); no units, no thousands separators. */
  answer: string;
  /** A worked solution whose answer is given as `\boxed{answer}` (generated ones end with that line). */
  solution: string;
  /** The task it comes from: 'arith', 'expr', 'linear', 'fraction', 'word', 'gsm8k', 'math', 'plain'. */
  task: string;
  /** Measured difficulty of this very problem (e.g. { digits: 2 }); keys depend on the task; may be empty. */
  difficulty: Record<string, number>;
}

/** A named list of problems. */
export interface Dataset {
  /** e.g. 'arith-train', 'arith-test-ood-digits', 'gsm8k-test'. */
  name: string;
  /** The problems, in a fixed order. */
  problems: Problem[];
}
